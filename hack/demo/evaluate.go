package main

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/inspect/evaluate"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// previewAnswers shows what `flagplane diff -f FILE --contexts FILE` adds
// to the dry run: which answers the edit changes, for two evaluation
// contexts, evaluated by flagd's own evaluator on the flag set as flagplane
// serves it.
func (d *demo) previewAnswers(ctx context.Context) error {
	ns := d.o.namespace
	d.step("Which answers will the edit change? (flagplane diff --contexts: flagd's own evaluator, before and after)")
	var ff v1beta1.FeatureFlag
	if err := d.cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-flags"}, &ff); err != nil {
		return fmt.Errorf("reading the flag set: %w", err)
	}
	edited := ff.DeepCopy()
	flag := edited.Spec.FlagSpec.Flags["new-checkout"]
	flag.DefaultVariant = "on"
	edited.Spec.FlagSpec.Flags["new-checkout"] = flag
	before, err := flagsets.Render(&ff)
	if err != nil {
		return err
	}
	after, err := flagsets.Render(edited)
	if err != nil {
		return err
	}
	contexts, err := evaluate.ParseContexts([]byte(`
- name: staff
  context: {email: jane@example.com}
- name: customer
  context: {email: joe@customer.test}
`))
	if err != nil {
		return err
	}
	d.say("$ flagplane diff -f shop-flags.yaml --contexts contexts.yaml   (contexts: staff jane@example.com, customer joe@customer.test)")
	// The demo's sources set no contextValues or headerToContextMappings,
	// its FeatureFlagSourcePolicy comes later, and each of its flagds
	// serves shop-flags alone: every consumer's flagd adds nothing to the
	// context and has no other source, as `flagplane diff` would find.
	changes := evaluate.Compare(before, after, contexts, evaluate.Serving{})
	if changes.Refused != "" {
		return fmt.Errorf("flagd would not load the edit: %s", changes.Refused)
	}
	var b strings.Builder
	for _, c := range changes.Contexts {
		if len(c.Changed) == 0 {
			fmt.Fprintf(&b, "%s: no flag changes\n", c.Name)
			continue
		}
		for _, f := range c.Changed {
			fmt.Fprintf(&b, "%s: %s\n", c.Name, f.String())
		}
	}
	d.block(b.String())
	return nil
}
