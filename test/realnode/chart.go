package realnode

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
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
