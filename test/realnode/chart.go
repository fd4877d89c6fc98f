package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// ChartImage is the manager image that charts/flagplane (under root)
// installs when no value says otherwise: its values' repository, at its
// values' tag or else its appVersion. The node's registry serves the
// image `make image` built under this reference, so that a plain `helm
// install` runs it.
func ChartImage(root string) (repository, tag string, err error) {
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	var values struct {
		ControllerManager struct {
			Manager struct {
				Image struct {
					Repository string `json:"repository"`
					Tag        string `json:"tag"`
				} `json:"image"`
			} `json:"manager"`
		} `json:"controllerManager"`
	}
	for file, into := range map[string]any{"Chart.yaml": &chart, "values.yaml": &values} {
		data, err := os.ReadFile(filepath.Join(root, "charts", "flagplane", file))
		if err != nil {
			return "", "", err
		}
		if err := yaml.Unmarshal(data, into); err != nil {
			return "", "", fmt.Errorf("reading the chart's %s: %w", file, err)
		}
	}
	img := values.ControllerManager.Manager.Image
	tag = img.Tag
	if tag == "" {
		tag = chart.AppVersion
	}
	if img.Repository == "" || tag == "" {
		return "", "", fmt.Errorf("the chart names no manager image (repository %q, tag %q)", img.Repository, tag)
	}
	return img.Repository, tag, nil
}

// InstallFlagplane installs charts/flagplane (under root) as a user does,
// `helm install flagplane <chart> --wait` with args added (e.g. --set),
// and waits until its validating webhook answers through its Service:
// Ready replicas take requests only once kube-proxy has their endpoints.
// It returns helm's output.
func (c *Cluster) InstallFlagplane(ctx context.Context, root string, args ...string) (string, error) {
	helmArgs := append([]string{"install", "flagplane", filepath.Join(root, "charts", "flagplane"), "--wait", "--timeout", "5m"}, args...)
	out, err := c.Helm(helmArgs...)
	if err != nil {
		return out, err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		probe := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"}}
		probe.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: []byte(`{"on":true}`), DefaultVariant: "on"}}
		return c.Client.Create(ctx, probe, client.DryRunAll) == nil, nil
	})
	if err != nil {
		return out, fmt.Errorf("waiting for flagplane's webhooks to answer through their Service: %w", err)
	}
	return out, nil
}
