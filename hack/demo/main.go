// Command demo is `make demo`: flagplane end to end on a fresh machine, in
// one command.
//
// It builds what is missing (the control plane's binaries, through make),
// starts a local control plane (etcd, kube-apiserver,
// kube-controller-manager), runs the operator in this process — the same
// manager as the binary, with its admission webhooks when the build has them
// — applies config/samples and shows what flagplane made of them: the
// generated ConfigMap, what was injected into a Pod that the ReplicaSet
// controller created, the source's status and the topology (written to
// topology.dot and topology.svg). Then it edits a flag and shows the
// ConfigMap following, and last stages edits with a
// FeatureFlagRolloutPolicy: a canary namespace first, a halt when its pod
// turns unready, a promotion to every namespace. It prints the kubeconfig so that kubectl can be used
// meanwhile, and stops everything cleanly on Ctrl-C.
//
// It exits by itself when standard input is not a terminal (CI), or after
// -hold.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var o options
	flag.DurationVar(&o.hold, "hold", 0, "keep the control plane and the operator running this long after the demo, then stop (default: until Ctrl-C when standard input is a terminal, else stop at once)")
	flag.StringVar(&o.outDir, "out", ".", "folder to write topology.dot and topology.svg to")
	flag.StringVar(&o.namespace, "namespace", "shop", "namespace to apply the samples to")
	flag.BoolVar(&o.skipBuild, "skip-build", false, "do not run `make controlplane` first")
	flag.Parse()
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "hold" {
			o.holdSet = true
		}
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills at once
	}()
	d := newDemo(o, os.Stdout)
	err := d.run(ctx)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		d.say("interrupted: everything was stopped")
		os.Exit(130)
	default:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type options struct {
	hold      time.Duration
	holdSet   bool
	outDir    string
	namespace string
	skipBuild bool
}

// errInterrupted marks a step cut short by Ctrl-C.
var errInterrupted = errors.New("interrupted")
