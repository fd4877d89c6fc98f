package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/topology"
)

// Formats are the output formats of Write.
var Formats = []string{"text", "json", "yaml"}

// Write writes r as text (for people), json or yaml.
func Write(w io.Writer, r *Report, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "yaml":
		b, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "text", "":
		_, err := io.WriteString(w, text(r))
		return err
	}
	return fmt.Errorf("unknown output format %q: use one of %s", format, strings.Join(Formats, ", "))
}

func text(r *Report) string {
	var b strings.Builder
	b.WriteString(r.Object + "\n")
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		b.WriteString("  " + title + ":\n")
		for _, it := range items {
			b.WriteString("    - " + it + "\n")
		}
	}
	if r.Reaches == nil {
		var sources []string
		for _, s := range r.Sources {
			sources = append(sources, "FeatureFlagSource "+s.Source+": "+strings.Join(s.Why, "; "))
		}
		if len(sources) == 0 && len(r.InProcessConfigs) == 0 {
			b.WriteString("  no FeatureFlagSource or InProcessConfiguration applies to it: its pods get no flagd\n")
		}
		list("sources that apply, and why", sources)
		var sets []string
		for _, d := range r.FlagSets {
			line := "FeatureFlag " + d.FlagSet + " through " + d.Source + ", provider " + d.Provider
			if d.ConfigMap != "" {
				line += " (ConfigMap " + d.ConfigMap + ")"
			}
			sets = append(sets, line)
		}
		list("flag sets its flagd serves", sets)
		list("in-process configurations", r.InProcessConfigs)
		list("references that do not resolve (nothing is delivered through them)", r.Unresolved)
		if r.Sidecar != nil {
			b.WriteString("  sidecar:\n")
			b.WriteString("    image: " + r.Sidecar.Image + "\n")
			b.WriteString("    args: " + strings.Join(r.Sidecar.Args, " ") + "\n")
			if len(r.Sidecar.Volumes) > 0 {
				b.WriteString("    mounts: " + strings.Join(r.Sidecar.Volumes, ", ") + "\n")
			}
			b.WriteString("    (" + r.Sidecar.Note + ")\n")
		}
		list("sidecar settings in force that a source or a policy sets (the rest are the operator's defaults)", r.Settings)
		list("settings a source set and another overrode", r.Overridden)
		list("settings decided by FeatureFlagSourcePolicies", r.Policies)
		list("policy blocks that did not apply", r.PolicyNotes)
		return b.String()
	}
	rc := r.Reaches
	if len(rc.Workloads)+len(rc.Flagds) == 0 {
		b.WriteString("  reaches no workload and no Flagd\n")
	}
	list("flag sets", rc.FlagSets)
	list("through sources", rc.Sources)
	list("workloads", rc.Workloads)
	list("Flagds", rc.Flagds)
	list("namespaces", rc.Namespaces)
	list("generated ConfigMaps", rc.ConfigMaps)
	list("referrers denied (no ReferenceGrant permits them)", rc.Denied)
	list("references that do not resolve", rc.Unresolved)
	if s := r.Served; s != nil {
		if s.Invalid == "" {
			b.WriteString("  serves revision " + topology.ShortRevision(s.Revision) + "\n")
		} else {
			b.WriteString("  revision " + topology.ShortRevision(s.Revision) + " is not served, its consumers keep its last valid content: " + s.Invalid + "\n")
		}
		list("probable mistakes (not served when the manager validates strictly)", s.Warnings)
	}
	if d := r.Delivered; d != nil {
		b.WriteString("  revision " + topology.ShortRevision(d.Revision))
		if d.Count != "" {
			b.WriteString(", delivered " + d.Count)
		}
		if s := r.Served; s != nil && s.Revision != d.Revision {
			b.WriteString(" (status, not yet of revision " + topology.ShortRevision(s.Revision) + ")\n")
		} else {
			b.WriteString(" (status)\n")
		}
		list("consumers", d.Consumers)
		if d.Unobserved != "" {
			b.WriteString("  " + d.Unobserved + "\n")
		}
		if d.Confirmed != "" {
			b.WriteString("  " + d.Confirmed + " pods serve what is planned for them, as their flagd answers\n")
			list("pods by namespace", d.Serving)
		}
	}
	return b.String()
}
