// Command manager runs the flagplane operator: it keeps the topology of flag
// sources, flag sets and workloads from informer events and reconciles the
// ConfigMaps, status and RBAC that follow from it.
//
// It watches the whole cluster by default, or only the namespaces of
// --namespaces; run with -h for every flag, --version for its version.
// With --fleet-hub it runs as a fleet hub instead: only the controllers
// that place the hub's FeatureFlags onto the member clusters of the
// inventory (controllers/fleet).
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/cmd/manager/app"
)

// version is set at build time (`make image`: -ldflags -X main.version=...).
var version = "dev"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flagplane:", err)
		os.Exit(1)
	}
}

func run() error {
	opts := app.DefaultOptions()
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	printVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *printVersion {
		fmt.Println("flagplane manager", version)
		return nil
	}
	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	logger.Info("flagplane manager", "version", version)

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	ctx := ctrl.LoggerInto(ctrl.SetupSignalHandler(), logger)
	if opts.Fleet.Hub {
		hub, err := app.NewHub(cfg, opts)
		if err != nil {
			return err
		}
		return hub.Start(ctx)
	}
	mgr, err := app.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
