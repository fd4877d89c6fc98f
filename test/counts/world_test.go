package counts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/test/operator"
	"github.com/flagplane/flagplane/workflows/injection"
)

// appImage is an application the node cannot run: an idle placeholder,
// which is all these specs need of the app container.
const appImage = "example.com/shop/web:1.0"

// world is what the suite runs on: the control plane with kube-scheduler,
// the test node, and the whole operator with its admission webhooks and
// its sync server.
type world struct {
	cp   *controlplane.ControlPlane
	node *node.Node
	op   *operator.Operator
}

// startWorld starts the control plane, the operator and the node, which
// runs the image flagplane injects as the real flagd binary. dir holds the
// operator's files.
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
	binDir := os.Getenv("KUBEBUILDER_ASSETS")
	if binDir == "" {
		binDir = filepath.Join(root, "bin")
	}
	w.cp, err = controlplane.Start(ctx, controlplane.Options{
		RootDir: root, BinDir: binDir, Scheduler: true, Log: log,
		WebhookInstallOptions: operator.WebhookInstallOptions(root),
	})
	if err != nil {
		return w, fmt.Errorf("starting the control plane: %w", err)
	}
	w.op, err = operator.Start(ctx, w.cp, operator.Options{PodAddress: podAddrs.PodAddress, SyncServer: true, Dir: dir, Configure: func(o *app.Options) {
		// The file specs run flagd as a user of their own (ownUser).
		o.Admission.Injection.AllowSecurityContextOverride = true
	}})
	if err != nil {
		return w, fmt.Errorf("starting the operator: %w", err)
	}
	w.node, err = node.Start(ctx, w.cp, node.Options{
		Log:            log,
		FlagdImage:     injection.DefaultSidecarImage,
		RestartBackoff: 500 * time.Millisecond, MaxRestartBackoff: 5 * time.Second,
	})
	if err != nil {
		return w, fmt.Errorf("starting the node: %w", err)
	}
	podAddrs.Set(w.node)
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

// podAddrs reaches the node's pods for the manager, whose ports are ports
// of this host.
var podAddrs node.Addresses
