package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/inspect/rolloutstatus"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/history"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// The staged-delivery scene: FeatureFlag pricing of the demo's namespace,
// read by a Deployment in each of two namespaces through a cross-namespace
// reference that a ReferenceGrant permits. Each namespace is a consumer of
// the flag set (its own generated ConfigMap), which a
// FeatureFlagRolloutPolicy stages: the canary namespace first, then,
// once promoted, everyone.
const (
	stagedFlagSet  = "pricing"
	stagedFlag     = "new-pricing"
	stagedApp      = "checkout"
	canaryNS       = "shop-canary"
	mainNS         = "shop-eu"
	healthyGate    = "demo.flagplane.dev/healthy"
	stagedWait     = 30 * time.Second
	stagedHoldBack = time.Second
)

// stagedFlags is the flag set and the grant that lets the two namespaces
// read it; %[1]s is the demo's namespace.
const stagedFlags = `apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: pricing, namespace: %[1]s}
spec:
  flagSpec:
    flags:
      new-pricing:
        state: ENABLED
        variants: {"on": true, "off": false}
        defaultVariant: "off"
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: pricing-readers, namespace: %[1]s}
spec:
  from:
  - {group: core.openfeature.dev, kind: FeatureFlagSource, namespace: shop-canary}
  - {group: core.openfeature.dev, kind: FeatureFlagSource, namespace: shop-eu}
  to:
  - {group: core.openfeature.dev, kind: FeatureFlag, name: pricing}
`

// stagedConsumer is a namespace with its labels and a source reading
// the flag set; %[1]s is the namespace, %[2]s its stage, %[3]s the demo's
// namespace.
const stagedConsumer = `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s, labels: {stage: %[2]s}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: pricing, namespace: %[1]s}
spec:
  sources: [{source: %[3]s/pricing, provider: file}]
  targetRefs: [{group: apps, kind: Deployment, name: checkout}]
`

// stagedDeployment is a namespace's Deployment; %[2]s is its pod
// template's readinessGates (the canary's has one).
const stagedDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: checkout, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: checkout}}
  template:
    metadata: {labels: {app: checkout}}
    spec:%[2]s
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: busybox:1.37
        command: ["sh", "-c", "while true; do sleep 3600; done"]
        securityContext: {allowPrivilegeEscalation: false, runAsNonRoot: true, runAsUser: 65532, capabilities: {drop: ["ALL"]}, seccompProfile: {type: RuntimeDefault}}
`

const canaryReadinessGates = `
      readinessGates: [{conditionType: demo.flagplane.dev/healthy}]`

// stagedPolicy stages pricing's edits: the canary namespace, then approval,
// then everyone; a pod of a workload serving the new revision that is not
// Ready halts the rollout.
const stagedPolicy = `apiVersion: delivery.flagplane.dev/v1alpha1
kind: FeatureFlagRolloutPolicy
metadata: {name: pricing, namespace: %[1]s}
spec:
  targetRef: {group: core.openfeature.dev, kind: FeatureFlag, name: pricing}
  steps:
  - name: canary
    namespaceSelector: {matchLabels: {stage: canary}}
    approval: true
  - name: everyone
    percentage: 100
  gates:
  - type: PodsReady
    for: 0s
`

// showStaged is the staged-delivery scene.
func (d *demo) showStaged(ctx context.Context) error {
	if err := d.stagedSetUp(ctx); err != nil {
		return err
	}
	first, err := d.stagedEdit(ctx)
	if err != nil {
		return err
	}
	if err := d.stagedHalt(ctx, first); err != nil {
		return err
	}
	return d.stagedPromote(ctx, first)
}

// stagedSetUp applies the flag set, its two consumers and the policy,
// makes the canary's pod Ready through its readiness gate, and waits
// until both flagds answer and the policy has its stable revision.
func (d *demo) stagedSetUp(ctx context.Context) error {
	ns := d.o.namespace
	d.step("Staged delivery: FeatureFlag %s/%s, read by Deployment checkout in namespaces %s (stage=canary) and %s (stage=main)", ns, stagedFlagSet, canaryNS, mainNS)
	objects := fmt.Sprintf(stagedFlags, ns) + "---\n" + fmt.Sprintf(stagedConsumer, canaryNS, "canary", ns) + "---\n" + fmt.Sprintf(stagedConsumer, mainNS, "main", ns)
	if out, err := d.kubectl([]byte(objects), "apply", "--server-side", "-f", "-"); err != nil {
		return fmt.Errorf("applying the staged scene's flag set and sources: %w: %s", err, out)
	}
	d.say("$ kubectl apply -f pricing.yaml   (FeatureFlag %s/pricing with %s \"off\"; a ReferenceGrant for both namespaces;", ns, stagedFlag)
	d.say("  in each namespace a FeatureFlagSource reading %s/pricing with the file provider, for Deployment checkout)", ns)
	// The sources in the graph before the Deployments' first pods are
	// admitted, as applySamples does.
	if err := d.poll(ctx, stagedWait, func(context.Context) (bool, error) {
		v := d.mgr.Controller.Topology().Snapshot()
		_, a := v.Source(topology.SourceKey(canaryNS, stagedFlagSet))
		_, b := v.Source(topology.SourceKey(mainNS, stagedFlagSet))
		return a && b, nil
	}); err != nil {
		return fmt.Errorf("waiting for the staged scene's sources in the topology: %w", err)
	}
	deployments := fmt.Sprintf(stagedDeployment, canaryNS, canaryReadinessGates) + "---\n" + fmt.Sprintf(stagedDeployment, mainNS, "")
	if out, err := d.kubectl([]byte(deployments), "apply", "--server-side", "-f", "-"); err != nil {
		return fmt.Errorf("applying the staged scene's Deployments: %w: %s", err, out)
	}
	d.say("the canary's pod template has a readiness gate, which the demo sets as a health checker would:")
	d.block(strings.TrimPrefix(canaryReadinessGates, "\n"))

	pod, err := d.stagedPod(ctx, canaryNS, containersReady)
	if err != nil {
		return err
	}
	if err := d.setHealthy(ctx, pod, true); err != nil {
		return err
	}
	if _, err := d.stagedPod(ctx, canaryNS, podReady); err != nil {
		return err
	}
	if _, err := d.stagedPod(ctx, mainNS, podReady); err != nil {
		return err
	}
	for _, c := range []string{canaryNS, mainNS} {
		if err := d.waitAnswer(ctx, c, "off"); err != nil {
			return err
		}
	}

	d.say("a FeatureFlagRolloutPolicy stages pricing's edits: the canary namespace first, promoted by hand; a pod that is not Ready halts it:")
	manifest := fmt.Sprintf(stagedPolicy, ns)
	d.block(manifest)
	if out, err := d.kubectl([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		return fmt.Errorf("applying the rollout policy: %w: %s", err, out)
	}
	p, err := d.rolloutUntil(ctx, "the rollout policy to record the stable revision", func(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
		return st.Phase == deliveryv1alpha1.PhaseCompleted && st.StableRevision != "" && len(st.Steps) == 2
	})
	if err != nil {
		return err
	}
	out, err := d.kubectl(nil, "get", "featureflagrolloutpolicies", "-n", ns)
	if err != nil {
		return err
	}
	d.say("$ kubectl get featureflagrolloutpolicies -n %s", ns)
	d.block(out)
	d.say("revision %s is stable: every consumer serves it", p.Status.StableRevision)
	return d.showAnswers(ctx)
}

// stagedEdit turns new-pricing on and shows the edit staged to the canary
// namespace alone, waiting for approval; it returns the policy then.
func (d *demo) stagedEdit(ctx context.Context) (*deliveryv1alpha1.FeatureFlagRolloutPolicy, error) {
	ns := d.o.namespace
	d.step("Editing %s to \"on\": the canary namespace serves it, %s keeps the stable revision", stagedFlag, mainNS)
	stable, err := d.rolloutUntil(ctx, "the rollout policy", func(deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool { return true })
	if err != nil {
		return nil, err
	}
	patch := `{"spec":{"flagSpec":{"flags":{"` + stagedFlag + `":{"defaultVariant":"on"}}}}}`
	d.say("$ kubectl patch featureflag %s -n %s --type merge -p '%s'", stagedFlagSet, ns, patch)
	start := time.Now()
	if err := d.patchFlagSet(ctx, patch); err != nil {
		return nil, err
	}
	if err := d.waitAnswer(ctx, canaryNS, "on"); err != nil {
		return nil, err
	}
	d.measured("staged edit to the canary's flagd serving it", time.Since(start))
	p, err := d.rolloutUntil(ctx, "the rollout to wait for approval at its first step", func(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
		return st.Phase == deliveryv1alpha1.PhasePaused && st.Step == 0 && st.StableRevision == stable.Status.StableRevision &&
			st.TargetRevision != st.StableRevision && strings.Contains(st.Message, "waiting for approval") && allServePlanned(st)
	})
	if err != nil {
		return nil, err
	}
	if err := d.keepsAnswer(ctx, mainNS, "off"); err != nil {
		return nil, err
	}
	if err := d.showAnswers(ctx); err != nil {
		return nil, err
	}
	return p, d.showRolloutStatus(ctx, p)
}

// stagedHalt makes the canary's pod unready and shows the PodsReady gate
// halting the rollout and the canary back on the stable revision; then
// the canary is healthy again.
func (d *demo) stagedHalt(ctx context.Context, running *deliveryv1alpha1.FeatureFlagRolloutPolicy) error {
	d.step("The canary's pod turns unready: the PodsReady gate halts the rollout, and every namespace returns to the stable revision")
	pod, err := d.stagedPod(ctx, canaryNS, podReady)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := d.setHealthy(ctx, pod, false); err != nil {
		return err
	}
	if _, err := d.rolloutUntil(ctx, "the PodsReady gate to halt the rollout", func(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
		return st.Phase == deliveryv1alpha1.PhaseHalted && st.TargetRevision == running.Status.TargetRevision &&
			strings.Contains(st.Message, "gate PodsReady failed") && strings.Contains(st.Message, pod.Name)
	}); err != nil {
		return err
	}
	if err := d.waitAnswer(ctx, canaryNS, "off"); err != nil {
		return err
	}
	d.measured("canary unready to its flagd serving the stable revision again", time.Since(start))
	p, err := d.rolloutUntil(ctx, "every consumer to serve the stable revision", func(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
		return st.Phase == deliveryv1alpha1.PhaseHalted && allServe(st, st.StableRevision)
	})
	if err != nil {
		return err
	}
	if err := d.showRolloutStatus(ctx, p); err != nil {
		return err
	}
	if err := d.showAnswers(ctx); err != nil {
		return err
	}
	events, err := d.kubectl(nil, "get", "events", "-n", d.o.namespace, "--field-selector", "reason=RolloutHalted", "-o", "custom-columns=TYPE:.type,REASON:.reason,KIND:.involvedObject.kind,NAME:.involvedObject.name")
	if err != nil {
		return err
	}
	d.say("$ kubectl get events -n %s --field-selector reason=RolloutHalted", d.o.namespace)
	d.block(events)
	d.say("the rollout stays halted until the flag set is edited again; the canary is made healthy again meanwhile:")
	if err := d.setHealthy(ctx, pod, true); err != nil {
		return err
	}
	_, err = d.stagedPod(ctx, canaryNS, podReady)
	return err
}

// stagedPromote makes a new edit, which restarts the rollout from the
// canary, and promotes it through to Completed.
func (d *demo) stagedPromote(ctx context.Context, halted *deliveryv1alpha1.FeatureFlagRolloutPolicy) error {
	ns := d.o.namespace
	d.step("A new edit restarts the rollout at the canary; promoted, it reaches every namespace")
	patch := `{"spec":{"flagSpec":{"metadata":{"pricing":"v2"}}}}`
	d.say("$ kubectl patch featureflag %s -n %s --type merge -p '%s'   (new-pricing stays \"on\": a new revision)", stagedFlagSet, ns, patch)
	if err := d.patchFlagSet(ctx, patch); err != nil {
		return err
	}
	p, err := d.rolloutUntil(ctx, "the new rollout to wait for approval at its first step", func(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
		return st.Phase == deliveryv1alpha1.PhasePaused && st.Step == 0 && st.TargetRevision != halted.Status.TargetRevision &&
			st.TargetRevision != st.StableRevision && allServePlanned(st)
	})
	if err != nil {
		return err
	}
	if err := d.waitAnswer(ctx, canaryNS, "on"); err != nil {
		return err
	}
	if err := d.keepsAnswer(ctx, mainNS, "off"); err != nil {
		return err
	}
	d.say("%s", p.Status.Message)
	if err := d.showAnswers(ctx); err != nil {
		return err
	}

	promote := deliveryv1alpha1.PromoteValue(p.Status, 0)
	d.say("$ flagplane rollout promote ff/%s -n %s", stagedFlagSet, ns)
	d.say("  (which annotates the policy with the rollout and step it means: %s=%s)", deliveryv1alpha1.PromoteAnnotation, promote)
	start := time.Now()
	if out, err := d.kubectl(nil, "annotate", "featureflagrolloutpolicies", stagedFlagSet, "-n", ns, deliveryv1alpha1.PromoteAnnotation+"="+promote); err != nil {
		return fmt.Errorf("promoting the rollout: %w: %s", err, out)
	}
	target := p.Status.TargetRevision
	if p, err = d.rolloutUntil(ctx, "the promoted rollout to complete", func(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
		return st.Phase == deliveryv1alpha1.PhaseCompleted && st.StableRevision == target && allServe(st, target)
	}); err != nil {
		return err
	}
	if err := d.waitAnswer(ctx, mainNS, "on"); err != nil {
		return err
	}
	d.measured("promote to every namespace's flagd serving the revision", time.Since(start))
	if err := d.showRolloutStatus(ctx, p); err != nil {
		return err
	}
	if err := d.showAnswers(ctx); err != nil {
		return err
	}
	args := []string{"get", "featureflagrevisions", "-n", ns, "-l", deliveryv1alpha1.FlagSetLabel + "=" + history.FlagSetLabelValue(stagedFlagSet)}
	out, err := d.kubectl(nil, args...)
	if err != nil {
		return err
	}
	d.say("the revisions the flag set went through, each recorded as a FeatureFlagRevision (what a rollout returns consumers to):")
	d.say("$ kubectl %s", strings.Join(args, " "))
	d.block(out)
	return nil
}

// patchFlagSet merge-patches the scene's FeatureFlag.
func (d *demo) patchFlagSet(ctx context.Context, patch string) error {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: d.o.namespace, Name: stagedFlagSet}}
	if err := d.cp.Client.Patch(ctx, ff, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("editing FeatureFlag %s: %w", stagedFlagSet, err)
	}
	return nil
}

// setHealthy sets the canary pod's readiness gate condition through the
// pod's status subresource, as the health checker owning it would.
func (d *demo) setHealthy(ctx context.Context, pod *corev1.Pod, healthy bool) error {
	status := corev1.ConditionFalse
	if healthy {
		status = corev1.ConditionTrue
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": healthyGate, "status": status, "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}}}})
	if err != nil {
		return err
	}
	d.say("$ kubectl patch pod %s -n %s --subresource status --type strategic -p '{\"status\":{\"conditions\":[{\"type\":\"%s\",\"status\":\"%s\"}]}}'",
		pod.Name, pod.Namespace, healthyGate, status)
	if out, err := d.kubectl(nil, "patch", "pod", pod.Name, "-n", pod.Namespace, "--subresource", "status", "--type", "strategic", "-p", string(patch)); err != nil {
		return fmt.Errorf("setting the readiness gate of pod %s: %w: %s", pod.Name, err, out)
	}
	return nil
}

func containersReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.ContainersReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// stagedPod waits until namespace ns has one pod of the scene's
// Deployment, admitted with flagplane's injection, that ok accepts.
func (d *demo) stagedPod(ctx context.Context, ns string, ok func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := d.poll(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := d.cp.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": stagedApp}); err != nil {
			return false, err
		}
		var live []*corev1.Pod
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil {
				live = append(live, &pods.Items[i])
			}
		}
		if len(live) != 1 || live[0].Annotations[restarts.AnnotationInjection] == "" || !ok(live[0]) {
			return false, nil
		}
		pod = live[0]
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the pod of %s/%s (its logs: %s): %w", ns, stagedApp, d.node.Dir(), err)
	}
	return pod, nil
}

// answer asks the flagd of namespace ns's pod for new-pricing.
func (d *demo) answer(ctx context.Context, ns string) (flagdapi.Evaluation, error) {
	pod, err := d.stagedPod(ctx, ns, func(*corev1.Pod) bool { return true })
	if err != nil {
		return flagdapi.Evaluation{}, err
	}
	addr, ok := d.node.Addr(types.NamespacedName{Namespace: ns, Name: pod.Name}, injection.SidecarName, 8013)
	if !ok {
		return flagdapi.Evaluation{}, fmt.Errorf("the test node knows no port 8013 of %s/%s's flagd", ns, pod.Name)
	}
	return flagdapi.Resolve(ctx, addr, flagdapi.Boolean, stagedFlag, nil)
}

// waitAnswer waits until namespace ns's flagd answers variant.
func (d *demo) waitAnswer(ctx context.Context, ns, variant string) error {
	var last flagdapi.Evaluation
	var lastErr error
	if err := d.poll(ctx, stagedWait, func(ctx context.Context) (bool, error) {
		last, lastErr = d.answer(ctx, ns)
		return lastErr == nil && last.Variant == variant, nil
	}); err != nil {
		return fmt.Errorf("%s's flagd never answered %q for %s (last: %+v, %v): %w", ns, variant, stagedFlag, last, lastErr, err)
	}
	return nil
}

// keepsAnswer checks that namespace ns's flagd answers variant, and still
// does stagedHoldBack later: ample for flagd to have followed a wrong
// ConfigMap (the node projects an edit within milliseconds).
func (d *demo) keepsAnswer(ctx context.Context, ns, variant string) error {
	deadline := time.Now().Add(stagedHoldBack)
	for {
		e, err := d.answer(ctx, ns)
		if err != nil {
			return err
		}
		if e.Variant != variant {
			return fmt.Errorf("%s's flagd answered %q for %s, where the rollout keeps it at %q", ns, e.Variant, stagedFlag, variant)
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// showAnswers prints what each namespace's flagd answers for new-pricing.
func (d *demo) showAnswers(ctx context.Context) error {
	var b strings.Builder
	for _, ns := range []string{canaryNS, mainNS} {
		e, err := d.answer(ctx, ns)
		if err != nil {
			return err
		}
		j, _ := json.Marshal(e)
		fmt.Fprintf(&b, "%-12s %s\n", ns+":", j)
	}
	d.say("each namespace's flagd, asked for %s (ResolveBoolean on its pod's port 8013):", stagedFlag)
	d.block(b.String())
	return nil
}

// showRolloutStatus prints the policy as `flagplane rollout status` does.
func (d *demo) showRolloutStatus(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy) error {
	var b strings.Builder
	var ff v1beta1.FeatureFlag
	if err := d.cp.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Spec.TargetRef.Name}, &ff); err != nil {
		return err
	}
	if err := rolloutstatus.Write(&b, p, ff.Status.Serving, time.Now()); err != nil {
		return err
	}
	d.say("$ flagplane rollout status ff/%s -n %s", p.Spec.TargetRef.Name, p.Namespace)
	d.block(b.String())
	return nil
}

// rolloutUntil waits until the scene's policy has a status of the
// policy's generation that ok accepts, and returns the policy.
func (d *demo) rolloutUntil(ctx context.Context, what string, ok func(deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool) (*deliveryv1alpha1.FeatureFlagRolloutPolicy, error) {
	key := client.ObjectKey{Namespace: d.o.namespace, Name: stagedFlagSet}
	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
	if err := d.poll(ctx, stagedWait, func(ctx context.Context) (bool, error) {
		if err := d.cp.Client.Get(ctx, key, p); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return p.Status.ObservedGeneration == p.Generation && ok(p.Status), nil
	}); err != nil {
		return nil, fmt.Errorf("waiting for %s (phase %q, step %d, message %q): %w", what, p.Status.Phase, p.Status.Step, p.Status.Message, err)
	}
	return p, nil
}

// allServePlanned tells whether every consumer of the status serves the
// revision it is planned to.
func allServePlanned(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
	n := 0
	for _, s := range st.Steps {
		for _, c := range s.Consumers {
			if c.Serving != c.Planned {
				return false
			}
			n++
		}
	}
	return n > 0
}

// allServe tells whether every consumer of the status serves revision.
func allServe(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, revision string) bool {
	n := 0
	for _, s := range st.Steps {
		for _, c := range s.Consumers {
			if c.Planned != revision || c.Serving != revision {
				return false
			}
			n++
		}
	}
	return n > 0
}
