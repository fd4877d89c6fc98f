package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

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

func diffCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flagplane diff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		file, namespace, output string
		graph                   graphFlags
	)
	fs.StringVar(&file, "f", "", "the manifests to apply: FeatureFlags and FeatureFlagSources (- for standard input)")
	fs.StringVar(&namespace, "n", "default", "namespace of objects that name none")
	fs.StringVar(&output, "o", "text", "output format: text, json, yaml")
	graph.bind(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: flagplane diff -f FILE [--kubeconfig FILE | --from-dir DIR] [-n NAMESPACE] [-o text|json|yaml]

Says, before you apply FILE, what each FeatureFlag and FeatureFlagSource in
it would reach and change, computed from the same graph the manager keeps
(as the admission webhooks' warnings are, in detail): for a flag set, the
sources, workloads, Flagds and namespaces that get it; for a source, the
workloads it would gain and lose, those whose sidecar changes (their new
pods get it) and those that restart now (rolloutOnChange). Objects are
taken in file order, each seeing the ones before it. Nothing is applied.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if file == "" {
		return fmt.Errorf("%w: give the manifests with -f FILE", errUsage)
	}
	if err := graph.check(); err != nil {
		return err
	}
	if !slices.Contains([]string{"text", "json", "yaml"}, output) {
		return fmt.Errorf("%w: unknown -o %q: use one of text, json, yaml", errUsage, output)
	}
	var in io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	objects, err := readChanges(in, namespace)
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}

	top, err := graph.load(ctx, namespace, stderr)
	if err != nil {
		return err
	}
	changes, err := diff(top.Snapshot(), objects, injection.DefaultOptions())
	if err != nil {
		return err
	}
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
	_, err = io.WriteString(stdout, diffText(changes))
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
