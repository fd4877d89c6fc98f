// Command manager runs the flagplane operator: it keeps the topology of flag
// sources, flag sets and workloads from informer events and reconciles the
// ConfigMaps, status and RBAC that follow from it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/controllers"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flagplane:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		metricsAddr, probeAddr, namespaces string
		leaderElect                        bool
		workers                            int
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the metrics endpoint (0 disables it)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the health and readiness probes")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader, so that only one replica writes")
	flag.StringVar(&namespaces, "namespaces", "", "comma-separated namespaces to watch; empty watches the whole cluster")
	flag.IntVar(&workers, "workers", 2, "workers per workflow queue")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		return err
	}
	cacheOpts := cache.Options{}
	if namespaces != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range strings.Split(namespaces, ",") {
			cacheOpts.DefaultNamespaces[strings.TrimSpace(ns)] = cache.Config{}
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(cacheOpts),
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "flagplane.core.openfeature.dev",
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	c, err := controllers.New(ctx, mgr, controllers.Options{Workers: workers})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("topology", c.ReadyCheck); err != nil {
		return err
	}
	ctrl.Log.Info("starting flagplane")
	return mgr.Start(ctx)
}
