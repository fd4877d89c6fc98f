package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/inspect/evaluate"
	"github.com/flagplane/flagplane/inspect/explain"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/blast"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
)

// change is what one object of the file would do.
type change struct {
	Object  string         `json:"object"`
	FlagSet *blast.FlagSet `json:"flagSet,omitempty"`
	Source  *blast.Source  `json:"source,omitempty"`
	// Evaluations, with --contexts, say which of a flag set's flags change
	// what flagd serves each context: once for each distinct way its
	// consumers' flagds add to the context (a source's contextValues and
	// headerToContextMappings, and what FeatureFlagSourcePolicies set).
	Evaluations []servedEvaluations `json:"evaluations,omitempty"`
	// Confirmed and Serving are, from a FeatureFlag's status as the
	// cluster holds it, how many of its pods serve the revision planned
	// for them now, in all and per namespace (explain.ServingLine).
	Confirmed string   `json:"confirmed,omitempty"`
	Serving   []string `json:"serving,omitempty"`
}

// servedEvaluations are the answers that change for the consumers whose
// flagds serve the flag set alike.
type servedEvaluations struct {
	// Serving is what their flagds add to every request's context.
	Serving evaluate.Serving `json:"serving"`
	// Consumers are the workloads and Flagds whose flagd serves it so;
	// none when nothing consumes the flag set yet.
	Consumers []topology.Key `json:"consumers,omitempty"`
	// ServedBefore and ServedAfter are the other FeatureFlags their flagd
	// serves, before and after this one in its --sources: a key that one
	// of ServedAfter holds is answered from it (Shadowed), and this flag
	// set's keys hide ServedBefore's.
	ServedBefore []topology.Key `json:"servedBefore,omitempty"`
	ServedAfter  []topology.Key `json:"servedAfter,omitempty"`
	// Unseen are the other sources of their flagd that are no FeatureFlag
	// (a URI: http, grpc, a file of the pod's own): flagplane cannot tell
	// which keys they hold.
	Unseen []string `json:"unseenSources,omitempty"`
	evaluate.Changes
}

func newDiffCmd(kube *kubeFlags) *cobra.Command {
	var file, output, contextsFile, revisions string
	graph := graphFlags{kube: kube}
	cmd := &cobra.Command{
		Use:   "diff -f FILE | diff ff/NAME --revisions A..B",
		Short: "What applying FILE's flag sets and sources would reach and change",
		Long: `Says, before you apply FILE, what each FeatureFlag and FeatureFlagSource in
it would reach and change, computed from the same graph the manager keeps
(as the admission webhooks' warnings are, in detail): for a flag set, the
sources, workloads, Flagds and namespaces that get it; for a source, the
workloads it would gain and lose, those whose sidecar changes (their new
pods get it) and those that restart now (rolloutOnChange). Objects are
taken in file order, each seeing the ones before it. Nothing is applied.

The graph is read from the cluster of the kubeconfig, with your own
permissions, or offline from manifests (--from-dir, which needs no
kubeconfig). Objects of FILE that name no namespace are put in -n's, else
the kubeconfig context's, as kubectl apply does (offline: default).

With --contexts, each FeatureFlag's flags are also evaluated for the named
evaluation contexts of CONTEXTS_FILE, with the flag set as it is (none if
it is new) and as FILE has it, and the flags whose variant, value or reason
change are listed per context. The evaluator is flagd's own code (flagd
` + evaluate.FlagdVersion + `'s, linked into this binary), fed the flag set exactly as
flagplane serves it, so its answers are flagd's, $evaluators, fractional
and sem_ver included.

With ff/NAME --revisions A..B instead of -f, the FeatureFlag goes from
its recorded revision A to revision B (flagplane history lists them;
either may be "current", its spec now), read from the cluster, and is
compared as a FILE holding revision B would be on a cluster holding
revision A: what a rollback from one to the other changes.

CONTEXTS_FILE is YAML or JSON, a list of:

  - name: eu-user
    context: {region: eu, email: ana@example.com, targetingKey: user-1}
    headers: {X-Tier: gold}    # optional: the HTTP headers it sends

A context is what a client sends; the flagd that answers adds to it what
it is started with: a source's contextValues (--context-value), which
override the request's, and headerToContextMappings
(--context-from-header), whose headers override both. A flagd that serves
several flag sets answers a key from the last of its sources that holds
it. The consumers of each flag set are grouped by what their flagd adds
and serves besides, and each context is evaluated once per group.`,
		Example: `  flagplane diff -f checkout.yaml
  flagplane diff -f web-source.yaml -n shop -o yaml
  flagplane diff -f change.yaml --from-dir ./manifests
  flagplane diff -f checkout.yaml --contexts users.yaml
  flagplane diff ff/shop-flags -n shop --revisions 3..current --contexts users.yaml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("revisions") {
				return oneFlagSet(cmd, args)
			}
			return noArgs(cmd, args)
		},
		ValidArgsFunction: completeFlagSets(kube),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("revisions") {
				if file != "" || graph.offline() {
					return fmt.Errorf("%w: --revisions compares two revisions of a FeatureFlag of the cluster: leave out -f and --from-dir", errUsage)
				}
				return diffRevisions(cmd, &graph, args[0], revisions, contextsFile, output)
			}
			return diffFile(cmd, &graph, file, contextsFile, output)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the manifests to apply: FeatureFlags and FeatureFlagSources (- for standard input)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: "+strings.Join(diffFormats, ", "))
	cmd.Flags().StringVar(&revisions, "revisions", "", "with ff/NAME instead of -f: compare its recorded revisions A..B (numbers, or current for its spec now)")
	cmd.Flags().StringVar(&contextsFile, "contexts", "", "evaluate each FeatureFlag's flags before and after for the named evaluation contexts of this file (YAML or JSON: a list of {name, context}) with flagd's evaluator, and list the flags that change")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.MarkFlagFilename("contexts", "yaml", "yml", "json")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(diffFormats))
	graph.bind(cmd)
	return cmd
}

// diffFile is diff -f FILE: the change each object of FILE would make, in
// file order, on the graph of the cluster or of --from-dir (diff).
func diffFile(cmd *cobra.Command, graph *graphFlags, file, contextsFile, output string) error {
	if file == "" {
		return fmt.Errorf("%w: give the manifests with -f FILE", errUsage)
	}
	if err := checkOutput(output, diffFormats); err != nil {
		return err
	}
	if err := graph.check(cmd); err != nil {
		return err
	}
	in := cmd.InOrStdin()
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	// The namespace of objects that name none is known before the
	// graph is read: a file that cannot be read is said first.
	namespace, err := graph.kube.namespace(graph.offline())
	if err != nil {
		return err
	}
	objects, err := readChanges(in, namespace)
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	var contexts []evaluate.Context
	if cmd.Flags().Changed("contexts") {
		if contexts, err = readContexts(contextsFile); err != nil {
			return err
		}
	}
	top, _, err := graph.load(cmd.Context(), cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	changes, err := diff(top.Snapshot(), objects, injection.DefaultOptions(), contexts)
	if err != nil {
		return err
	}
	return writeChanges(cmd.OutOrStdout(), changes, output)
}

var diffFormats = []string{"text", "json", "yaml"}

func writeChanges(stdout io.Writer, changes []change, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(changes)
	case "yaml":
		b, err := sigyaml.Marshal(changes)
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	_, err := io.WriteString(stdout, diffText(changes))
	return err
}

// readChanges decodes the FeatureFlags and FeatureFlagSources of r, in
// order; other kinds are refused, so that nothing is silently left out.
func readChanges(r io.Reader, namespace string) ([]any, error) {
	dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []any
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, err
		}
		switch meta.Kind {
		case v1beta1.FeatureFlagKind:
			ff := &v1beta1.FeatureFlag{}
			if err := json.Unmarshal(raw, ff); err != nil {
				return nil, err
			}
			if ff.Namespace == "" {
				ff.Namespace = namespace
			}
			out = append(out, ff)
		case v1beta1.FeatureFlagSourceKind:
			src := &v1beta1.FeatureFlagSource{}
			if err := json.Unmarshal(raw, src); err != nil {
				return nil, err
			}
			if src.Namespace == "" {
				src.Namespace = namespace
			}
			out = append(out, src)
		default:
			return nil, fmt.Errorf("kind %q: flagplane diff tells what FeatureFlags and FeatureFlagSources change", meta.Kind)
		}
	}
}

// readContexts reads the evaluation contexts of --contexts.
func readContexts(path string) ([]evaluate.Context, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: --contexts names the file of evaluation contexts", errUsage)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading --contexts: %w", err)
	}
	contexts, err := evaluate.ParseContexts(data)
	if err != nil {
		return nil, fmt.Errorf("reading --contexts %s: %w", path, err)
	}
	return contexts, nil
}

// diff computes each object's change, in order, each on the graph with the
// ones before it applied; with contexts, it evaluates each flag set's flags
// for them before and after.
func diff(v *topology.View, objects []any, opts injection.Options, contexts []evaluate.Context) ([]change, error) {
	var out []change
	for _, o := range objects {
		switch obj := o.(type) {
		case *v1beta1.FeatureFlag:
			r, err := blast.OfFlagSet(v, obj, nil)
			if err != nil {
				return nil, err
			}
			c := change{Object: "FeatureFlag " + obj.Namespace + "/" + obj.Name, FlagSet: r}
			if cur, ok := v.FlagSet(topology.FlagSetKey(obj.Namespace, obj.Name)); ok {
				c.Confirmed = cur.Status.Confirmed
				for _, ns := range cur.Status.Serving {
					c.Serving = append(c.Serving, explain.ServingLine(ns))
				}
			}
			after, err := v.WithFlagSet(obj)
			if err != nil {
				return nil, err
			}
			if contexts != nil {
				if c.Evaluations, err = evaluations(v, after, obj, r, opts, contexts); err != nil {
					return nil, err
				}
			}
			out = append(out, c)
			v = after
		case *v1beta1.FeatureFlagSource:
			r, err := blast.OfSource(v, obj, opts)
			if err != nil {
				return nil, err
			}
			out = append(out, change{Object: "FeatureFlagSource " + obj.Namespace + "/" + obj.Name, Source: r})
			if v, err = v.WithSource(obj); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// evaluations compares what flagd serves with the flag set of the graph
// and with ff, both rendered as flagplane serves them, once for each way
// ff's consumers (r, in after) have their flagd add to the context.
func evaluations(v, after *topology.View, ff *v1beta1.FeatureFlag, r *blast.FlagSet, opts injection.Options,
	contexts []evaluate.Context) ([]servedEvaluations, error) {
	var before string
	if cur, ok := v.FlagSet(topology.FlagSetKey(ff.Namespace, ff.Name)); ok {
		var err error
		if before, err = flagsets.Render(cur); err != nil {
			return nil, err
		}
	}
	next, err := flagsets.Render(ff)
	if err != nil {
		return nil, err
	}
	groups := servings(after, topology.FlagSetKey(ff.Namespace, ff.Name), r, opts)
	out := make([]servedEvaluations, 0, len(groups))
	for _, g := range groups {
		stack := evaluate.Stack{Lower: renderAll(after, g.ServedBefore), Upper: renderAll(after, g.ServedAfter)}
		g.Changes = evaluate.CompareStack(stack, before, next, contexts, g.Serving)
		out = append(out, g)
	}
	return out, nil
}

// renderAll renders flag sets as flagplane serves them; one that does not
// render (flagplane serves it to nobody) is left out.
func renderAll(v *topology.View, keys []topology.Key) []string {
	var out []string
	for _, k := range keys {
		if ff, ok := v.FlagSet(k); ok {
			if doc, err := flagsets.Render(ff); err == nil {
				out = append(out, doc)
			}
		}
	}
	return out
}

// servings groups the consumers of flagSet by how their flagd serves it:
// what it adds to every request's context, read from the flagd container
// each gets (its --context-value and --context-from-header args), and what
// else it serves, before and after the flag set in its --sources. Groups
// come in the order of their first consumers. With no consumer, the flag
// set is evaluated as a flagd that serves it alone and adds nothing.
func servings(v *topology.View, flagSet topology.Key, r *blast.FlagSet, opts injection.Options) []servedEvaluations {
	var out []servedEvaluations
	index := map[string]int{}
	add := func(k topology.Key, args []string, served []injection.ServedEntry) {
		last := -1
		for i, e := range served {
			if e.FlagSet == flagSet {
				last = i
			}
		}
		if last < 0 {
			return // its flagd does not serve the flag set (the entry was left out)
		}
		g := servedEvaluations{}
		g.Serving.ContextValues, g.Serving.HeaderMappings = injection.ContextArgs(args)
		for i, e := range served {
			switch {
			case e.FlagSet == flagSet:
			case e.FlagSet == (topology.Key{}):
				g.Unseen = append(g.Unseen, e.Provider+" "+e.URI)
			case i < last:
				g.ServedBefore = append(g.ServedBefore, e.FlagSet)
			default:
				g.ServedAfter = append(g.ServedAfter, e.FlagSet)
			}
		}
		// JSON marshals maps with sorted keys: equal groups, equal ids.
		id, _ := json.Marshal([]any{g.Serving, g.ServedBefore, g.ServedAfter, g.Unseen})
		i, ok := index[string(id)]
		if !ok {
			i = len(out)
			index[string(id)] = i
			out = append(out, g)
		}
		out[i].Consumers = append(out[i].Consumers, k)
	}
	for _, w := range r.Workloads {
		if inj, served := injection.DesiredServed(v, w, opts); inj.Sidecar != nil {
			add(w, inj.Sidecar.Args, served)
		}
	}
	for _, f := range r.Flagds {
		if src, state, ok := v.FlagdSource(f); ok && state == topology.RefResolved {
			if sc := injection.ContainerOfSource(v, f, src, opts); sc.Container != nil {
				add(f, sc.Container.Args, sc.Served)
			}
		}
	}
	if len(out) == 0 {
		out = append(out, servedEvaluations{})
	}
	return out
}

func diffText(changes []change) string {
	var b strings.Builder
	list := func(title string, keys []topology.Key) {
		if len(keys) == 0 {
			return
		}
		b.WriteString("  " + title + ":\n")
		for _, k := range keys {
			b.WriteString("    - " + string(k.Kind) + " " + k.Namespace + "/" + k.Name + "\n")
		}
	}
	for _, c := range changes {
		b.WriteString(c.Object + "\n")
		switch {
		case c.FlagSet != nil:
			b.WriteString("  " + strings.TrimPrefix(c.FlagSet.Summary(), "flagplane: ") + "\n")
			list("through", c.FlagSet.Sources)
			list("workloads", c.FlagSet.Workloads)
			list("Flagds", c.FlagSet.Flagds)
			list("subscribing on the sync server (flagd-proxy)", c.FlagSet.SyncSubscribers)
			if c.Confirmed != "" {
				b.WriteString("  now " + c.Confirmed + " pods serve what is planned for them, as their flagd answers (status):\n")
				for _, line := range c.Serving {
					b.WriteString("    - " + line + "\n")
				}
			}
			if len(c.Evaluations) > 0 {
				evaluationsText(&b, c.Evaluations)
			}
		case c.Source != nil:
			b.WriteString("  " + strings.TrimPrefix(c.Source.Summary(), "flagplane: ") + "\n")
			list("gains", c.Source.Gained)
			list("loses", c.Source.Lost)
			list("sidecar changes (their new pods)", c.Source.Changed)
			list("restart now (rolloutOnChange)", c.Source.Restarts)
			list("Flagds", c.Source.Flagds)
		}
	}
	return b.String()
}

func evaluationsText(b *strings.Builder, groups []servedEvaluations) {
	e := groups[0].Changes // refusals are the flag set's, the same in every group
	if e.Refused != "" {
		fmt.Fprintf(b, "  %s would not load this flag set (%s): it keeps serving the current one\n", e.Evaluator, e.Refused)
		return
	}
	fmt.Fprintf(b, "  evaluated with %s's evaluator: %s in %s\n", e.Evaluator, plural(e.Flags, "flag"), plural(len(e.Contexts), "context"))
	if e.CurrentRefused != "" {
		fmt.Fprintf(b, "  (flagd would not load the current flag set (%s): its flags count as not found)\n", e.CurrentRefused)
	}
	// The answers are told once per way of serving, but for one flagd
	// that adds nothing to the context, as before any source sets context.
	first := groups[0]
	titled := len(groups) > 1 || !first.Serving.Empty() || len(first.ServedBefore)+len(first.ServedAfter)+len(first.Unseen) > 0
	for _, g := range groups {
		indent := "    "
		if titled {
			fmt.Fprintf(b, "  as %s serve it%s:\n", consumersText(g.Consumers), servingText(g.Serving))
			indent = "      "
		}
		if len(g.Shadowed) > 0 {
			fmt.Fprintf(b, "%sanswered from a later source of the same flagd (%s), not from this flag set: %s\n",
				indent, keysText(g.ServedAfter), strings.Join(g.Shadowed, ", "))
		}
		if len(g.Unseen) > 0 {
			fmt.Fprintf(b, "%salso serves sources flagplane cannot see into, whose keys may hide or be hidden by these: %s\n",
				indent, strings.Join(g.Unseen, ", "))
		}
		for _, c := range g.Contexts {
			if len(c.Changed) == 0 {
				b.WriteString(indent + c.Name + ": no flag changes\n")
				continue
			}
			verb := "changes"
			if len(c.Changed) > 1 {
				verb = "change"
			}
			fmt.Fprintf(b, "%s%s: %s %s\n", indent, c.Name, plural(len(c.Changed), "flag"), verb)
			for _, f := range c.Changed {
				b.WriteString(indent + "  - " + f.String() + "\n")
			}
		}
	}
}

// consumersText names at most three consumers, and counts the others.
func consumersText(keys []topology.Key) string {
	const shown = 3
	if len(keys) == 0 {
		return "flagd processes"
	}
	var names []string
	for _, k := range keys[:min(len(keys), shown)] {
		names = append(names, string(k.Kind)+" "+k.Namespace+"/"+k.Name)
	}
	if len(keys) > shown {
		names = append(names, fmt.Sprintf("%d more", len(keys)-shown))
	}
	return strings.Join(names, ", ")
}

// keysText names keys as "Kind namespace/name", comma-separated.
func keysText(keys []topology.Key) string {
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, string(k.Kind)+" "+k.Namespace+"/"+k.Name)
	}
	return strings.Join(names, ", ")
}

// servingText says what a flagd adds to the context, as its args say it.
func servingText(s evaluate.Serving) string {
	if s.Empty() {
		return ", adding nothing to the context"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.ContextValues)) {
		parts = append(parts, "--context-value "+k+"="+s.ContextValues[k])
	}
	for _, h := range slices.Sorted(maps.Keys(s.HeaderMappings)) {
		parts = append(parts, "--context-from-header "+h+"="+s.HeaderMappings[h])
	}
	return " with " + strings.Join(parts, " ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
