// Command fleetdemo shows a fleet at work (make fleet): a hub and three
// member clusters (dev, staging and prod), each a real control plane, the
// members running flagplane. It places a FeatureFlag on all three, stages
// an edit dev → staging → prod under a FeatureFlagRolloutPolicy whose steps
// select clusters, then stages another edit while staging's flagplane is
// down: staging never confirms, gate Confirmed halts the rollout, and dev
// is given the stable revision back. After each act, `flagplane fleet
// status` says which revision each cluster serves.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/fleetenv"
	fleetwf "github.com/flagplane/flagplane/workflows/fleet"
)

const (
	ns      = "team-a"
	flagSet = "checkout"
)

func main() {
	verbose := flag.Bool("v", false, "print the control planes' and managers' logs")
	flag.Parse()
	if *verbose {
		log.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		log.SetLogger(zap.New(zap.WriteTo(discard{})))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *verbose)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetdemo:", err)
		os.Exit(1)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

type demo struct {
	f     *fleetenv.Fleet
	cli   string
	start time.Time
}

func (d *demo) say(format string, args ...any) {
	fmt.Printf("[%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, verbose bool) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	d := &demo{start: time.Now()}
	var logw *os.File
	if verbose {
		logw = os.Stderr
	} else if logw, err = os.Open(os.DevNull); err != nil {
		return err
	}
	d.say("starting a hub and three member clusters (dev, staging, prod), each a real control plane, the members running flagplane")
	members := []fleetenv.MemberSpec{}
	for _, env := range []string{"dev", "staging", "prod"} {
		members = append(members, fleetenv.MemberSpec{Name: env, Labels: map[string]string{"env": env}, Granted: []string{ns}})
	}
	d.f, err = fleetenv.Start(ctx, fleetenv.Options{Root: root, Log: logw, Namespaces: []string{ns}, Members: members})
	if err != nil {
		return err
	}
	defer func() { _ = d.f.Stop() }()
	if d.cli, err = buildCLI(root); err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(filepath.Dir(d.cli)) }()
	if err := d.f.StartHub(); err != nil {
		return err
	}
	if err := d.setUp(ctx); err != nil {
		return err
	}
	if err := d.stagedEdit(ctx); err != nil {
		return err
	}
	return d.haltedEdit(ctx)
}

// setUp grants team-a every cluster, and places the flag set with a
// policy of cluster steps.
func (d *demo) setUp(ctx context.Context) error {
	c := d.f.Client
	grant := &fleetv1alpha1.FleetGrant{ObjectMeta: metav1.ObjectMeta{Namespace: fleetenv.InventoryNamespace, Name: "team-a"},
		Spec: fleetv1alpha1.FleetGrantSpec{Namespaces: []string{ns}}}
	ff := fixtures.FlagSet(ns, flagSet, "off")
	target := fleetv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: "FeatureFlag", Name: flagSet}
	placement := &fleetv1alpha1.FeatureFlagPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: flagSet},
		Spec: fleetv1alpha1.FeatureFlagPlacementSpec{TargetRef: target}}
	pause := &metav1.Duration{Duration: 5 * time.Second}
	step := func(env string, p *metav1.Duration) deliveryv1alpha1.RolloutStep {
		return deliveryv1alpha1.RolloutStep{Name: env, Pause: p,
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": env}}}
	}
	policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: flagSet},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference(target),
			Steps:     []deliveryv1alpha1.RolloutStep{step("dev", pause), step("staging", pause), step("prod", nil)},
			Gates:     []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateConfirmed, For: &metav1.Duration{Duration: 20 * time.Second}}},
		}}
	for _, o := range []client.Object{grant, ff, placement, policy} {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	d.say("FleetGrant team-a: namespace team-a may place into every cluster")
	d.say("FeatureFlag team-a/checkout (revision %s), placed everywhere; its rollout policy: dev, 5 s, staging, 5 s, prod; gate Confirmed within 20 s",
		short(fleetwf.Revision(ff)))
	if err := d.follow(ctx, fleetwf.Revision(ff), deliveryv1alpha1.PhaseCompleted, time.Minute); err != nil {
		return err
	}
	if err := d.waitFor(ctx, time.Minute, func(p *fleetv1alpha1.FeatureFlagPlacement) bool {
		return p.Status.Current == "3/3"
	}); err != nil {
		return err
	}
	return d.status(ctx, "every cluster serves it")
}

// stagedEdit edits the flag set on the hub and narrates its steps.
func (d *demo) stagedEdit(ctx context.Context) error {
	rev, err := d.edit(ctx, "on", "edit 1")
	if err != nil {
		return err
	}
	d.say("edit 1 on the hub: revision %s; the rollout stages it", short(rev))
	if err := d.follow(ctx, rev, deliveryv1alpha1.PhaseCompleted, 2*time.Minute); err != nil {
		return err
	}
	return d.status(ctx, "edit 1 reached dev, then staging, then prod")
}

// haltedEdit stages an edit while staging's flagplane is down.
func (d *demo) haltedEdit(ctx context.Context) error {
	staging := d.f.Members[1]
	if err := staging.Op.Stop(); err != nil {
		return err
	}
	d.say("staging's flagplane is stopped: staging's copy may be written, but nothing there confirms it")
	rev, err := d.edit(ctx, "off", "edit 2")
	if err != nil {
		return err
	}
	d.say("edit 2 on the hub: revision %s", short(rev))
	if err := d.follow(ctx, rev, deliveryv1alpha1.PhaseHalted, 2*time.Minute); err != nil {
		return err
	}
	// dev gets the stable spec back; wait until the hub says it serves it.
	if err := d.waitFor(ctx, time.Minute, func(p *fleetv1alpha1.FeatureFlagPlacement) bool {
		for _, c := range p.Status.Clusters {
			if c.Cluster == "dev" {
				return c.State == fleetv1alpha1.ClusterCurrent && c.Revision == c.Planned
			}
		}
		return false
	}); err != nil {
		return err
	}
	return d.status(ctx, "halted: dev serves the stable revision again, prod never got edit 2")
}

// follow prints the policy's message each time it changes, until the
// rollout of revision target reaches phase.
func (d *demo) follow(ctx context.Context, target string, phase deliveryv1alpha1.RolloutPhase, within time.Duration) error {
	last := ""
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var p deliveryv1alpha1.FeatureFlagRolloutPolicy
		if err := d.f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: flagSet}, &p); err != nil {
			return err
		}
		// Before the hub has seen the edit, the status is the last rollout's.
		if p.Status.TargetRevision == target {
			if msg := string(p.Status.Phase) + ": " + p.Status.Message; msg != last {
				d.say("  rollout %s", msg)
				last = msg
			}
			if p.Status.Phase == phase {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("the rollout did not reach %s within %s", phase, within)
}

func (d *demo) waitFor(ctx context.Context, within time.Duration, ok func(*fleetv1alpha1.FeatureFlagPlacement) bool) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var p fleetv1alpha1.FeatureFlagPlacement
		if err := d.f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: flagSet}, &p); err != nil {
			return err
		}
		if ok(&p) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errors.New("the placement did not get there in time")
}

// edit sets the flag's default variant, and names the edit in the flag's
// metadata so that every edit is a revision of its own.
func (d *demo) edit(ctx context.Context, variant, name string) (string, error) {
	var ff v1beta1.FeatureFlag
	if err := d.f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: flagSet}, &ff); err != nil {
		return "", err
	}
	f := ff.Spec.FlagSpec.Flags[fixtures.FlagKey]
	f.DefaultVariant = variant
	f.Metadata = []byte(`{"edit":"` + name + `"}`)
	ff.Spec.FlagSpec.Flags[fixtures.FlagKey] = f
	return fleetwf.Revision(&ff), d.f.Client.Update(ctx, &ff)
}

// status runs `flagplane fleet status` against the hub, as a user would.
func (d *demo) status(ctx context.Context, what string) error {
	d.say("%s:", what)
	fmt.Println("    $ flagplane fleet status ff/checkout -n team-a")
	out, err := exec.CommandContext(ctx, d.cli, "--kubeconfig", d.f.Hub.KubeconfigPath,
		"fleet", "status", "ff/"+flagSet, "-n", ns).CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("    │ " + line)
	}
	return err
}

func buildCLI(root string) (string, error) {
	dir, err := os.MkdirTemp("", "flagplane-fleetdemo-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "flagplane")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/flagplane")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the flagplane command: %w: %s", err, out)
	}
	return bin, nil
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
