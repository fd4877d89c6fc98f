package migrate

import (
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Action is what to do about a finding.
type Action string

const (
	// Remove: flagplane replaces it and nothing uses it; Apply deletes it.
	Remove Action = "remove"
	// InUse: flagplane replaces it, but pods still running the OpenFeature
	// Operator's sidecar use it (UsedBy); Apply leaves it until they are
	// rolled.
	InUse Action = "in use"
	// Manual: something for you to do (Do); Apply does not do it.
	Manual Action = "to do"
	// TakenOver: flagplane serves it as it is; nothing to do.
	TakenOver Action = "taken over"
)

// Object names a Kubernetes object.
type Object struct {
	APIVersion, Kind, Namespace, Name string
	UID                               types.UID
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Finding is one thing of the OpenFeature Operator's on the cluster.
type Finding struct {
	Object Object
	// Count, for TakenOver kinds: how many objects of the kind there are
	// (Object then names the kind only).
	Count int
	// What it is.
	What string
	// Means: what it does now that flagplane runs, and what replaces it.
	Means  string
	Action Action
	// UsedBy lists the pods (namespace/name) that still use it (InUse).
	UsedBy []string
	// Do says what to do (Manual, InUse).
	Do string
}

// Report is what Scan found.
type Report struct {
	// ManagerRunning: the OpenFeature Operator's manager is still
	// installed. Apply then removes nothing: it would put things back, and
	// its webhook injects beside flagplane's.
	ManagerRunning bool
	// ManagedBy is the value of app.kubernetes.io/managed-by on what
	// flagplane generates, by which the scan told flagplane's objects from
	// the OpenFeature Operator's.
	ManagedBy string
	Findings  []Finding
}

// Leftovers are the findings that need something done.
func (r *Report) Leftovers() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Action != TakenOver {
			out = append(out, f)
		}
	}
	return out
}

// ToRemove are the findings Apply deletes.
func (r *Report) ToRemove() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Action == Remove {
			out = append(out, f)
		}
	}
	return out
}

// Write prints the report for a person.
func (r *Report) Write(w io.Writer, applied bool) {
	left := r.Leftovers()
	if len(left) == 0 {
		fmt.Fprintln(w, "Nothing of the OpenFeature Operator is left.")
	} else {
		fmt.Fprintf(w, "The OpenFeature Operator's leftovers (%d):\n", len(left))
		for _, f := range left {
			fmt.Fprintf(w, "\n  %-7s %s\n", f.Action, f.Object)
			field(w, "what", f.What)
			field(w, "means", f.Means)
			if len(f.UsedBy) > 0 {
				field(w, "used by", strings.Join(f.UsedBy, ", "))
			}
			field(w, "do", f.Do)
		}
	}
	var taken []string
	for _, f := range r.Findings {
		if f.Action == TakenOver {
			taken = append(taken, fmt.Sprintf("%d %s", f.Count, f.Object.Kind))
		}
	}
	if len(taken) > 0 {
		fmt.Fprintf(w, "\nTaken over as they are: %s. flagplane serves them unchanged and writes only their\n"+
			"status subresource, never their spec: the field managers on them keep their fields, no conflict.\n", strings.Join(taken, ", "))
	}
	if r.ManagedBy == ofoManagedByValue {
		fmt.Fprintf(w, "\nflagplane labels what it generates %s=%s: the objects the OpenFeature Operator made for\n"+
			"Flagds are flagplane's now (taken over in place), not leftovers.\n", v1beta1.LabelManagedBy, r.ManagedBy)
	}
	switch n := len(r.ToRemove()); {
	case r.ManagerRunning:
		fmt.Fprintln(w, "\nThe OpenFeature Operator is still installed: uninstall it first (see \"to do\"), then run flagplane migrate --apply.")
	case n > 0 && !applied:
		fmt.Fprintf(w, "\nRun flagplane migrate --apply to remove the %d marked remove.\n", n)
	}
}

// field prints one labelled line of a finding, wrapped.
func field(w io.Writer, label, text string) {
	if text == "" {
		return
	}
	const width = 100
	prefix := fmt.Sprintf("          %-8s ", label+":")
	line := prefix
	for _, word := range strings.Fields(text) {
		if len(line)+len(word)+1 > width && len(line) > len(prefix) {
			fmt.Fprintln(w, strings.TrimRight(line, " "))
			line = strings.Repeat(" ", len(prefix))
		}
		line += word + " "
	}
	fmt.Fprintln(w, strings.TrimRight(line, " "))
}
