package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/test/operator"
	"github.com/flagplane/flagplane/workflows/injection"
)

// sdkClientImage stands for an application image built on the OpenFeature
// Go SDK: the node runs its containers as the SDK client of
// test/realclients (bin/flagplane-sdkclient).
const sdkClientImage = "example.com/shop/sdk-app:1.0"

// appImage is an application the node cannot run: an idle placeholder,
// which is all the specs of the sidecar need of the app container.
const appImage = "example.com/shop/web:1.0"

// gateInterval is the manager's --gate-interval here, and threeReads the
// time in which it reads a rollout's gates at least three times.
const (
	gateInterval = time.Second
	threeReads   = 3*gateInterval + gateInterval/2
)

// world is what the suite and the benchmark run on: the control plane with
// kube-scheduler, the test node, and the whole operator with its admission
// webhooks and its sync server.
type world struct {
	cp   *controlplane.ControlPlane
	node *node.Node
	op   *operator.Operator
	// binDir holds the binaries the suites run (bin/ of the repository,
	// or KUBEBUILDER_ASSETS): the control plane's, flagd, Prometheus.
	binDir string
}

// startWorld starts the control plane, the node and the operator. The node
// runs the image flagplane injects (injection.DefaultSidecarImage, at any
// tag or registry) as the real flagd binary. dir holds the operator's
// files.
func startWorld(ctx context.Context, log io.Writer, dir string) (w *world, err error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	w = &world{}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.stop())
			w = nil
		}
	}()
	// The control plane's binaries, as controlplane.Options.BinDir finds them.
	binDir := os.Getenv("KUBEBUILDER_ASSETS")
	if binDir == "" {
		binDir = filepath.Join(root, "bin")
	}
	w.binDir = binDir
	sdkClient := filepath.Join(binDir, "flagplane-sdkclient")
	// The InProcessConfiguration spec runs it with -from-env: an older
	// build would fail there with a less helpful message.
	if out, err := exec.Command(sdkClient, "-h").CombinedOutput(); !strings.Contains(string(out), "-from-env") {
		return w, fmt.Errorf("the OpenFeature SDK client %s is missing or predates -from-env: run `make realclients` (%v)", sdkClient, err)
	}
	w.cp, err = controlplane.Start(ctx, controlplane.Options{
		RootDir: root, BinDir: binDir, Scheduler: true, GatewayAPI: true, Log: log,
		WebhookInstallOptions: operator.WebhookInstallOptions(root),
	})
	if err != nil {
		return w, fmt.Errorf("starting the control plane: %w", err)
	}
	w.op, err = operator.Start(ctx, w.cp, operator.Options{SyncServer: true, Dir: dir, Configure: func(o *app.Options) {
		// The node's pods are reached through ports of this host: the
		// EvaluationErrors gate reads flagd's metrics there.
		o.PodAddress = func(pod *corev1.Pod, container string, port int32) (string, bool) {
			if w.node == nil {
				return "", false
			}
			return w.node.Addr(k8stypes.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, container, port)
		}
		// The Prometheus gate's spec runs a Prometheus of its own; with the
		// gates on, admission no longer refuses a policy naming one.
		o.PrometheusGates = true
		// A pod that does not serve its revision is reported within a
		// spec's patience.
		o.ConfirmBound = 20 * time.Second
		// Gates are read every second (every 5 s by default), and a spec
		// that shows a gate holding a step watches three reads.
		o.GateInterval = gateInterval
	}})
	if err != nil {
		return w, fmt.Errorf("starting the operator: %w", err)
	}
	w.node, err = node.Start(ctx, w.cp, node.Options{
		Log:        log,
		FlagdImage: injection.DefaultSidecarImage,
		Binaries:   map[string]string{sdkClientImage: sdkClient},
		// An SDK client that starts before its sync source is up exits and
		// is restarted: soon, not after the kubelet's 10 s.
		RestartBackoff: 500 * time.Millisecond, MaxRestartBackoff: 5 * time.Second,
	})
	if err != nil {
		return w, fmt.Errorf("starting the node: %w", err)
	}
	return w, nil
}

// stop stops the node (and every pod's processes), the operator and the
// control plane, in that order.
func (w *world) stop() error {
	var errs []error
	if w.node != nil {
		errs = append(errs, w.node.Stop())
	}
	if w.op != nil {
		errs = append(errs, w.op.Stop())
	}
	if w.cp != nil {
		errs = append(errs, w.cp.Stop())
	}
	return errors.Join(errs...)
}
