// Command cluster brings up a real single-node Kubernetes cluster on this
// machine (test/realnode: kubelet, containerd, CNI, kube-proxy, CoreDNS and
// a local registry mirror), installs flagplane into it from its Helm chart
// with the image `make image` built, applies config/samples, and keeps
// everything running until Ctrl-C: `make cluster`.
//
// The chart is installed as a user installs it: `helm install flagplane
// charts/flagplane --wait` with no values, since the registry serves the
// chart's default image reference.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/test/realnode"
)

func main() {
	var (
		hold          time.Duration
		syncFrequency time.Duration
		samples       bool
	)
	flag.DurationVar(&hold, "hold", -1, "keep the cluster this long (0: stop at once); default: until Ctrl-C when standard input is a terminal, else stop at once")
	flag.DurationVar(&syncFrequency, "sync-frequency", 0, "the kubelet's syncFrequency, how late a ConfigMap edit may reach a volume (0: the kubelet's default, 1m)")
	flag.BoolVar(&samples, "samples", true, "apply config/samples once flagplane runs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, hold, syncFrequency, samples)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, hold, syncFrequency time.Duration, samples bool) error {
	began := time.Now()
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	repo, tag, err := realnode.ChartImage(root)
	if err != nil {
		return err
	}
	image := repo + ":" + tag
	say("starting a single-node cluster: control plane, containerd, kubelet, kube-proxy, CoreDNS, registry")
	c, err := realnode.Start(ctx, realnode.Options{
		Log:           os.Stdout,
		SyncFrequency: syncFrequency,
		CRDDirs:       []string{controlplane.GatewayAPICRDDir(filepath.Join(root, "bin"))},
		Images:        []realnode.Image{{Ref: image, Layout: filepath.Join(root, "dist", "image")}},
	})
	if err != nil {
		return err
	}
	defer func() {
		say("stopping and removing the cluster")
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
		}
	}()
	clusterUp := time.Since(began)

	installed := time.Now()
	say("$ helm install flagplane charts/flagplane --wait    (image %s, from the node's registry)", image)
	out, err := c.InstallFlagplane(ctx, root)
	if err != nil {
		return err
	}
	fmt.Print(indent(out))
	install := time.Since(installed)
	if samples {
		say("$ kubectl apply -k config/samples")
		out, err = c.Kubectl("apply", "-k", filepath.Join(root, "config", "samples"))
		if err != nil {
			return err
		}
		fmt.Print(indent(out))
		say("$ kubectl rollout status deployment/shop-web")
		if out, err = c.Kubectl("rollout", "status", "deployment/shop-web", "--timeout=3m"); err != nil {
			return err
		}
		fmt.Print(indent(out))
		var pods corev1.PodList
		if err := c.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "shop-web"}); err != nil {
			return err
		}
		var ip string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && len(p.Spec.InitContainers) > 0 {
				ip = p.Status.PodIP
			}
		}
		addr := net.JoinHostPort(ip, "8013")
		say("$ curl -X POST http://%s/flagd.evaluation.v1.Service/ResolveBoolean -d '{\"flagKey\":\"new-checkout\"}'   (the Pod's flagd, injected by flagplane)", addr)
		e, err := flagdapi.Resolve(ctx, addr, flagdapi.Boolean, "new-checkout", nil)
		if err != nil {
			return fmt.Errorf("evaluating new-checkout at the sample's flagd: %w", err)
		}
		fmt.Printf("    value %v, variant %q, reason %s\n", e.Value, e.Variant, e.Reason)
	}
	out, err = c.Kubectl("get", "pods", "-A", "-o", "wide")
	if err != nil {
		return err
	}
	fmt.Print(indent(out))
	say("cluster up in %s, flagplane installed and Ready in %s more (%s in all)",
		clusterUp.Round(100*time.Millisecond), install.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))
	say("  export KUBECONFIG=%s", c.KubeconfigPath)
	say("  Pods at %s and Services at %s are routed from this machine; the cluster DNS is %s", c.PodCIDR, c.ServiceCIDR, c.DNSIP)

	var wait <-chan time.Time
	switch {
	case hold == 0:
		return nil
	case hold > 0:
		say("running for %s (Ctrl-C stops it sooner)", hold)
		wait = time.After(hold)
	case isTerminal(os.Stdin):
		say("running until Ctrl-C")
	default:
		say("standard input is not a terminal: stopping now (-hold 10m keeps the cluster for 10 minutes)")
		return nil
	}
	select {
	case <-ctx.Done():
		fmt.Println()
	case <-wait:
	}
	return nil
}

func say(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
