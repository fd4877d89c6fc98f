package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/blast"
	"github.com/flagplane/flagplane/workflows/injection"
)

// change is what one object of the file would do.
type change struct {
	Object  string         `json:"object"`
	FlagSet *blast.FlagSet `json:"flagSet,omitempty"`
	Source  *blast.Source  `json:"source,omitempty"`
}

func newDiffCmd(kube *kubeFlags) *cobra.Command {
	var file, output string
	graph := graphFlags{kube: kube}
	cmd := &cobra.Command{
		Use:   "diff -f FILE",
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
the kubeconfig context's, as kubectl apply does (offline: default).`,
		Example: `  flagplane diff -f checkout.yaml
  flagplane diff -f web-source.yaml -n shop -o yaml
  flagplane diff -f change.yaml --from-dir ./manifests`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			namespace, err := kube.namespace(graph.offline())
			if err != nil {
				return err
			}
			objects, err := readChanges(in, namespace)
			if err != nil {
				return fmt.Errorf("reading %s: %w", file, err)
			}
			top, _, err := graph.load(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			changes, err := diff(top.Snapshot(), objects, injection.DefaultOptions())
			if err != nil {
				return err
			}
			return writeChanges(cmd.OutOrStdout(), changes, output)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the manifests to apply: FeatureFlags and FeatureFlagSources (- for standard input)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: "+strings.Join(diffFormats, ", "))
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(diffFormats))
	graph.bind(cmd)
	return cmd
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

// diff computes each object's change, in order, each on the graph with the
// ones before it applied.
func diff(v *topology.View, objects []any, opts injection.Options) ([]change, error) {
	var out []change
	for _, o := range objects {
		switch obj := o.(type) {
		case *v1beta1.FeatureFlag:
			r, err := blast.OfFlagSet(v, obj)
			if err != nil {
				return nil, err
			}
			out = append(out, change{Object: "FeatureFlag " + obj.Namespace + "/" + obj.Name, FlagSet: r})
			if v, err = v.WithFlagSet(obj); err != nil {
				return nil, err
			}
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
