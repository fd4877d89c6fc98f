package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/gitopshealth"
)

// brokenSource names a flag set of another namespace, which no
// ReferenceGrant there permits: only a user can fix that.
const brokenSource = `apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: shop-broken, namespace: %s}
spec:
  sources:
  - {source: other-team/flags, provider: file}
`

// showHealth shows what GitOps tools read of the sample objects and of a
// broken source: kubectl wait, kstatus (Flux's health checks) and
// flagplane's Argo CD health check.
func (d *demo) showHealth(ctx context.Context) error {
	ns := d.o.namespace
	d.step("Health as GitOps tools read it: kubectl wait, kstatus (Flux), the Argo CD health check")
	args := []string{"wait", "-n", ns, "--for=condition=Ready", "--timeout=60s",
		"featureflag/shop-flags", "featureflagsource/shop", "flagd/shop-flagd", "featureflagsourcepolicies.policy.flagplane.dev/platform"}
	out, err := d.kubectl(nil, args...)
	if err != nil {
		return fmt.Errorf("kubectl wait: %w: %s", err, out)
	}
	d.say("$ kubectl %s", strings.Join(args, " "))
	d.block(out)

	manifest := fmt.Sprintf(brokenSource, ns)
	d.say("a source that names a flag set of another namespace, which no ReferenceGrant permits:")
	d.block(manifest)
	if out, err := d.kubectl([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		return fmt.Errorf("applying the broken source: %w: %s", err, out)
	}
	args = []string{"wait", "-n", ns, "--for=condition=Stalled", "--timeout=30s", "featureflagsource/shop-broken"}
	out, err = d.kubectl(nil, args...)
	if err != nil {
		return fmt.Errorf("kubectl wait: %w: %s", err, out)
	}
	d.say("$ kubectl %s", strings.Join(args, " "))
	d.block(out)
	args = []string{"wait", "-n", ns, "--for=condition=Ready", "--timeout=3s", "featureflagsource/shop-broken"}
	out, err = d.kubectl(nil, args...)
	if err == nil {
		return fmt.Errorf("kubectl wait --for=condition=Ready returned for a stalled source: %s", out)
	}
	d.say("$ kubectl %s", strings.Join(args, " "))
	d.block(strings.TrimSpace(out + "\n" + err.Error()))

	var b strings.Builder
	fmt.Fprintf(&b, "%-32s %-12s %-12s %s\n", "OBJECT", "KSTATUS", "ARGO CD", "MESSAGE")
	gvk := v1beta1.GroupVersion.WithKind(v1beta1.FeatureFlagSourceKind)
	for _, name := range []string{"shop", "shop-broken"} {
		u, err := d.live(ctx, gvk, ns, name)
		if err != nil {
			return err
		}
		ks, err := status.Compute(u)
		if err != nil {
			return err
		}
		argo, err := gitopshealth.Argo(u)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%-32s %-12s %-12s %s\n", "featureflagsource/"+name, ks.Status, argo.Status, argo.Message)
	}
	d.block(b.String())
	d.say("the Argo CD checks: charts/flagplane/files/argocd-cm-health.yaml; Flux's healthCheckExprs: config/gitops/flux (docs/gitops.md)")
	return nil
}

// live reads an object as a GitOps tool does, unstructured.
func (d *demo) live(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return u, d.cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
}
