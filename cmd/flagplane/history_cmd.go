package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api"
	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/history"
)

// rollbackFieldManager is the field manager of flagplane rollback's
// writes: the revision it makes is createdBy it.
const rollbackFieldManager = "flagplane-rollback"

// flagSetKinds are the kinds completion offers for ff/NAME (flagSetArg
// reads these and others).
var flagSetKinds = []string{"ff", "featureflag", "featureflags"}

// oneFlagSet is the Args of a command that takes one FeatureFlag as
// ff/NAME (flagSetArg).
func oneFlagSet(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: give one FeatureFlag as ff/NAME", errUsage)
	}
	_, err := flagSetArg(args[0])
	return err
}

// flagSetHistory is a FeatureFlag and its recorded revisions, oldest first:
// its own (ownRevision), which the commands read, and the others that name
// it, which they only list.
type flagSetHistory struct {
	ff        *v1beta1.FeatureFlag
	revisions []*deliveryv1alpha1.FeatureFlagRevision
	// others are the revisions labelled with the flag set's name and whose
	// spec.flagSet is it, but which are not its own, each with why.
	others []otherRevision
}

// otherRevision is a revision that names a flag set but is not its own.
type otherRevision struct {
	revision *deliveryv1alpha1.FeatureFlagRevision
	why      string
}

// historyClient is a client of the kubeconfig's cluster, and the namespace
// of -n (else the context's).
func historyClient(kube *kubeFlags) (client.Client, string, func(error) error, error) {
	cfg, err := kube.restConfig()
	if err != nil {
		return nil, "", nil, err
	}
	ns, err := kube.namespace(false)
	if err != nil {
		return nil, "", nil, err
	}
	s := runtime.NewScheme()
	if err := api.AddToScheme(s); err != nil {
		return nil, "", nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, "", nil, fmt.Errorf("creating a client: %w", err)
	}
	return c, ns, func(err error) error { return unreachable(cfg, err) }, nil
}

// readHistory reads the FeatureFlag namespace/name and its revisions: the
// revisions labelled with its name whose spec.flagSet is it.
func readHistory(ctx context.Context, c client.Reader, namespace, name string) (*flagSetHistory, error) {
	ff := &v1beta1.FeatureFlag{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ff); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("FeatureFlag %s/%s not found", namespace, name)
		}
		return nil, err
	}
	var list deliveryv1alpha1.FeatureFlagRevisionList
	if err := c.List(ctx, &list, client.InNamespace(namespace),
		client.MatchingLabels{deliveryv1alpha1.FlagSetLabel: history.FlagSetLabelValue(name)}); err != nil {
		return nil, fmt.Errorf("listing the revisions of FeatureFlag %s/%s: %w", namespace, name, err)
	}
	h := &flagSetHistory{ff: ff}
	for _, r := range history.Sorted(list.Items) {
		if r.Spec.FlagSet != name {
			continue
		}
		if why := notOwnRevision(ff, r); why != "" {
			h.others = append(h.others, otherRevision{revision: r, why: why})
			continue
		}
		h.revisions = append(h.revisions, r)
	}
	return h, nil
}

// notOwnRevision says why r is not a revision of ff's own, "" when it is:
// its controller owner is ff (the same UID, as the history records it), and
// its flagSpec renders to the revision it claims (history.ContentRevision,
// the graph's rendering; topology.SameRevision, for a revision of 12 hex
// digits recorded before revisions had 128 bits). A label and a
// spec.flagSet are what anyone who may create a FeatureFlagRevision can
// write; the graph serves a revision on the same terms
// (topology.UpsertRevision).
func notOwnRevision(ff *v1beta1.FeatureFlag, r *deliveryv1alpha1.FeatureFlagRevision) string {
	ref := metav1.GetControllerOf(r)
	switch {
	case ref == nil:
		return "it has no controller (left by a FeatureFlag deleted with --cascade=orphan? flagplane adopts such a revision " +
			"when its content is what it claims)"
	case ref.Kind != v1beta1.FeatureFlagKind || ref.UID != ff.UID:
		return fmt.Sprintf("its controller is %s %s (uid %s), not this FeatureFlag (uid %s)", ref.Kind, ref.Name, ref.UID, ff.UID)
	}
	got, err := history.ContentRevision(r)
	if err != nil {
		return fmt.Sprintf("its flagSpec cannot be rendered: %v", err)
	}
	if !topology.SameRevision(got, r.Spec.Revision) {
		return fmt.Sprintf("its flagSpec is revision %s, not the %s it claims", topology.ShortRevision(got), topology.ShortRevision(r.Spec.Revision))
	}
	return ""
}

// revision finds revision number of the flag set's own; an error says why
// one that is not its own is refused, or lists the numbers there are.
func (h *flagSetHistory) revision(number int64) (*deliveryv1alpha1.FeatureFlagRevision, error) {
	for _, o := range h.others {
		if o.revision.Spec.Number != number {
			continue
		}
		if slices.ContainsFunc(h.revisions, func(r *deliveryv1alpha1.FeatureFlagRevision) bool { return r.Spec.Number == number }) {
			// The flag set's own revision of the number is the one.
			break
		}
		return nil, fmt.Errorf("FeatureFlagRevision %s/%s (number %d) is not a revision of FeatureFlag %s/%s: %s; "+
			"flagplane reads only the flag set's own revisions", o.revision.Namespace, o.revision.Name, number, h.ff.Namespace, h.ff.Name, o.why)
	}
	if len(h.revisions) == 0 {
		return nil, fmt.Errorf("FeatureFlag %s/%s has no recorded revisions (flagplane records each spec it accepts; "+
			"is it running, and does the spec render?)", h.ff.Namespace, h.ff.Name)
	}
	var numbers []string
	for _, r := range h.revisions {
		if r.Spec.Number == number {
			return r, nil
		}
		numbers = append(numbers, strconv.FormatInt(r.Spec.Number, 10))
	}
	return nil, fmt.Errorf("FeatureFlag %s/%s has no revision %d: it has %s", h.ff.Namespace, h.ff.Name, number, strings.Join(numbers, ", "))
}

// serving is the revision the FeatureFlag serves: the newest whose hash
// is its status.revision; nil when none is.
func (h *flagSetHistory) serving() *deliveryv1alpha1.FeatureFlagRevision {
	for i := len(h.revisions) - 1; i >= 0; i-- {
		if h.ff.Status.Revision != "" && topology.SameRevision(h.revisions[i].Spec.Revision, h.ff.Status.Revision) {
			return h.revisions[i]
		}
	}
	return nil
}

var historyFormats = []string{"text", "wide", "json", "yaml"}

func newHistoryCmd(kube *kubeFlags) *cobra.Command {
	var (
		output   string
		revision int64
		timeout  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "history ff/NAME",
		Short: "The recorded revisions of a FeatureFlag, or the spec of one",
		Long: `Lists the revisions flagplane recorded of a FeatureFlag, oldest first:
every spec it accepted, as a FeatureFlagRevision numbered in order, with
its content hash (the status.revision it served), its age, who wrote it
(BY: the user the API server authenticated, which flagplane's webhook
keeps in the annotation delivery.flagplane.dev/spec-author; -o wide adds
the field manager the client named itself) and why (the annotation
delivery.flagplane.dev/change-cause). The revision the FeatureFlag serves
now is marked with *.

With --revision N it prints revision N's flagSpec, as YAML or (-o json)
JSON, as flagplane rollback would write it back.

Only the FeatureFlag's own revisions are read: those whose controller is
the FeatureFlag (its UID) and whose flagSpec is the content hash they
claim. Others that carry its label and name (left by an earlier
FeatureFlag of the name, or written by someone else) are listed after the
table with the reason, and --revision, diff --revisions and rollback
refuse them.`,
		Example: `  flagplane history ff/shop-flags -n shop
  flagplane history featureflag/shop-flags -n shop --revision 2
  flagplane history ff/shop-flags -n shop --revision 2 -o json`,
		Args:              oneFlagSet,
		ValidArgsFunction: completeFlagSets(kube),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, _ := flagSetArg(args[0])
			if err := checkOutput(output, historyFormats); err != nil {
				return err
			}
			c, ns, reword, err := historyClient(kube)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			h, err := readHistory(ctx, c, ns, name)
			if err != nil {
				return reword(err)
			}
			if cmd.Flags().Changed("revision") {
				r, err := h.revision(revision)
				if err != nil {
					return err
				}
				if output == "text" || output == "wide" {
					output = "yaml"
				}
				return writeAs(cmd.OutOrStdout(), r.Spec.FlagSpec, output)
			}
			if output == "json" || output == "yaml" {
				items := make([]deliveryv1alpha1.FeatureFlagRevision, 0, len(h.revisions))
				for _, r := range h.revisions {
					items = append(items, *r)
				}
				return writeAs(cmd.OutOrStdout(), items, output)
			}
			return writeHistory(cmd.OutOrStdout(), h, time.Now(), output == "wide")
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: "+strings.Join(historyFormats, ", ")+" (wide adds the FIELD MANAGER column; with --revision, text and wide are yaml)")
	cmd.Flags().Int64Var(&revision, "revision", 0, "print this revision's flagSpec")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up after this long")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(historyFormats))
	return cmd
}

// writeHistory writes the table of a flag set's revisions.
// With wide, it adds each revision's field manager, the name its client
// gave itself.
func writeHistory(w io.Writer, h *flagSetHistory, now time.Time, wide bool) error {
	if len(h.revisions) == 0 {
		if _, err := fmt.Fprintf(w, "FeatureFlag %s/%s has no recorded revisions\n", h.ff.Namespace, h.ff.Name); err != nil {
			return err
		}
		if err := writeUnrecorded(w, h); err != nil {
			return err
		}
		return writeOthers(w, h)
	}
	serving := h.serving()
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	header := "NUMBER\tREVISION\tAGE\tBY\t"
	if wide {
		header += "FIELD MANAGER\t"
	}
	fmt.Fprintln(tw, header+"CAUSE")
	for _, r := range h.revisions {
		number := strconv.FormatInt(r.Spec.Number, 10)
		if r == serving {
			number += "*"
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t", number, topology.ShortRevision(r.Spec.Revision), duration.HumanDuration(now.Sub(r.CreationTimestamp.Time)),
			orNone(r.Spec.CreatedBy))
		if wide {
			row += orNone(r.Spec.FieldManager) + "\t"
		}
		fmt.Fprintln(tw, row+oneLine(r.Spec.ChangeCause))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A row without a cause ends in the padding of its last column.
	for line := range strings.Lines(table.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	var err error
	switch {
	case serving != nil:
		_, err = fmt.Fprintf(w, "* serves now (status.revision %s)\n", topology.ShortRevision(h.ff.Status.Revision))
	case unrecorded(h.ff) != nil:
		err = writeUnrecorded(w, h)
	case h.ff.Status.Revision != "":
		_, err = fmt.Fprintf(w, "status.revision %s is no recorded revision: flagplane has not accepted the current spec (yet)\n", topology.ShortRevision(h.ff.Status.Revision))
	}
	if err != nil {
		return err
	}
	return writeOthers(w, h)
}

// unrecorded is the FeatureFlag's RevisionRecorded condition when it says
// that the spec it serves is not recorded.
func unrecorded(ff *v1beta1.FeatureFlag) *metav1.Condition {
	c := meta.FindStatusCondition(ff.Status.Conditions, deliveryv1alpha1.ConditionRevisionRecorded)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil
	}
	return c
}

// writeUnrecorded says why the spec the FeatureFlag serves is not
// recorded, when its status says so.
func writeUnrecorded(w io.Writer, h *flagSetHistory) error {
	c := unrecorded(h.ff)
	if c == nil {
		return nil
	}
	_, err := fmt.Fprintf(w, "status.revision %s is served, and not recorded (%s): %s\n", topology.ShortRevision(h.ff.Status.Revision), c.Reason, oneLine(c.Message))
	return err
}

// writeOthers lists the revisions that name the flag set but are not its
// own, which no command reads.
func writeOthers(w io.Writer, h *flagSetHistory) error {
	if len(h.others) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "not revisions of this FeatureFlag (history --revision, diff and rollback refuse them):\n"); err != nil {
		return err
	}
	for _, o := range h.others {
		if _, err := fmt.Fprintf(w, "  %s (number %d): %s\n", o.revision.Name, o.revision.Spec.Number, o.why); err != nil {
			return err
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// oneLine keeps a change cause on its row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// writeAs writes v as JSON or YAML.
func writeAs(w io.Writer, v any, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	b, err := sigyaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func newRollbackCmd(kube *kubeFlags) *cobra.Command {
	var (
		to      int64
		dryRun  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "rollback ff/NAME --to-revision N",
		Short: "Write a recorded revision's spec back into its FeatureFlag",
		Long: `Writes revision N's flagSpec into the FeatureFlag's spec.flagSpec, as field
manager ` + rollbackFieldManager + `, with the annotation
delivery.flagplane.dev/change-cause "rollback to revision N". flagplane
then serves it, and records it as a new revision (the history is an audit
trail: the spec gets the next number, with revision N's hash).

Nothing is written when the spec is already revision N's. With --dry-run
it says what would change, and asks the API server (a dry-run update,
admission included) whether it would take it, without writing.`,
		Example: `  flagplane rollback ff/shop-flags -n shop --to-revision 2
  flagplane rollback ff/shop-flags -n shop --to-revision 2 --dry-run`,
		Args:              oneFlagSet,
		ValidArgsFunction: completeFlagSets(kube),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, _ := flagSetArg(args[0])
			if !cmd.Flags().Changed("to-revision") {
				return fmt.Errorf("%w: give the revision to roll back to with --to-revision N (flagplane history lists them)", errUsage)
			}
			c, ns, reword, err := historyClient(kube)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return reword(rollback(ctx, c, ns, name, to, dryRun, cmd.OutOrStdout()))
		},
	}
	cmd.Flags().Int64Var(&to, "to-revision", 0, "the number of the revision to roll back to (flagplane history lists them)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would change, and check that the API server would take it, without writing")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up after this long")
	return cmd
}

// rollback writes revision to's flagSpec into the FeatureFlag.
func rollback(ctx context.Context, c client.Client, namespace, name string, to int64, dryRun bool, w io.Writer) error {
	h, err := readHistory(ctx, c, namespace, name)
	if err != nil {
		return err
	}
	r, err := h.revision(to)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("FeatureFlag %s/%s", namespace, name)
	changes, err := flagSpecChanges(h.ff.Spec.FlagSpec, r.Spec.FlagSpec)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		_, err := fmt.Fprintf(w, "%s already has the spec of revision %d (%s): nothing to roll back\n", what, to, topology.ShortRevision(r.Spec.Revision))
		return err
	}
	ff := h.ff.DeepCopy()
	ff.Spec.FlagSpec = *r.Spec.FlagSpec.DeepCopy()
	if ff.Annotations == nil {
		ff.Annotations = map[string]string{}
	}
	cause := fmt.Sprintf("rollback to revision %d", to)
	ff.Annotations[deliveryv1alpha1.ChangeCauseAnnotation] = cause
	opts := []client.UpdateOption{client.FieldOwner(rollbackFieldManager)}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	// The update carries the resourceVersion read: an edit in between
	// fails it rather than being overwritten.
	if err := c.Update(ctx, ff, opts...); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("%s changed while rolling back: run the command again: %w", what, err)
		}
		return fmt.Errorf("rolling %s back to revision %d: %w", what, to, err)
	}
	verb := "rolled back"
	if dryRun {
		verb = "would roll back (dry run: nothing written)"
	}
	fmt.Fprintf(w, "%s %s to revision %d (%s):\n", what, verb, to, topology.ShortRevision(r.Spec.Revision))
	for _, ch := range changes {
		fmt.Fprintf(w, "  %s\n", ch)
	}
	_, err = fmt.Fprintf(w, "  annotation %s: %q\n", deliveryv1alpha1.ChangeCauseAnnotation, cause)
	return err
}

// flagSpecChanges lists what going from cur to next changes, per flag
// (added, removed, and the fields of a changed one) and for the flag
// set's $evaluators and metadata. The specs are compared as JSON values,
// so that the spelling of their raw JSON does not count.
func flagSpecChanges(cur, next v1beta1.FlagSpec) ([]string, error) {
	a, err := jsonValue(cur)
	if err != nil {
		return nil, err
	}
	b, err := jsonValue(next)
	if err != nil {
		return nil, err
	}
	var out []string
	af, _ := a["flags"].(map[string]any)
	bf, _ := b["flags"].(map[string]any)
	for _, key := range sortedKeys(af, bf) {
		before, inA := af[key]
		after, inB := bf[key]
		switch {
		case !inA:
			out = append(out, "flag "+key+": added")
		case !inB:
			out = append(out, "flag "+key+": removed")
		case !reflect.DeepEqual(before, after):
			bm, _ := before.(map[string]any)
			am, _ := after.(map[string]any)
			var fields []string
			for _, field := range sortedKeys(bm, am) {
				if !reflect.DeepEqual(bm[field], am[field]) {
					fields = append(fields, field)
				}
			}
			out = append(out, "flag "+key+": "+strings.Join(fields, ", ")+" changed")
		}
	}
	for _, key := range sortedKeys(a, b) {
		if key != "flags" && !reflect.DeepEqual(a[key], b[key]) {
			out = append(out, key+" changed")
		}
	}
	return out, nil
}

func jsonValue(spec v1beta1.FlagSpec) (map[string]any, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// sortedKeys are the keys of a and b, sorted, once each.
func sortedKeys(a, b map[string]any) []string {
	var keys []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// completeFlagSets completes ff/NAME with the FeatureFlags of the
// namespace, from the cluster (nothing, quietly, when it cannot be read).
func completeFlagSets(kube *kubeFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		kind, prefix, slash := strings.Cut(toComplete, "/")
		if !slash {
			var out []cobra.Completion
			for _, k := range flagSetKinds[:2] {
				if strings.HasPrefix(k, strings.ToLower(toComplete)) {
					out = append(out, k+"/")
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		}
		if !slices.Contains(flagSetKinds, strings.ToLower(kind)) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := kube.namespace(false)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, name := range kube.listNames(cmd.Context(), v1beta1.GroupVersion.WithResource("featureflags"), ns) {
			if strings.HasPrefix(name, prefix) {
				out = append(out, kind+"/"+name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
