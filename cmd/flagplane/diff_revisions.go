package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/inspect/evaluate"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// currentRevision names a FeatureFlag's spec now in --revisions.
const currentRevision = "current"

// revisionRange reads --revisions A..B: each a revision number or current.
func revisionRange(s string) (string, string, error) {
	a, b, ok := strings.Cut(s, "..")
	if !ok || !isRevisionRef(a) || !isRevisionRef(b) {
		return "", "", fmt.Errorf("%w: --revisions is A..B, each a revision number or %s (not %q)", errUsage, currentRevision, s)
	}
	return a, b, nil
}

func isRevisionRef(s string) bool {
	if s == currentRevision {
		return true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0
}

// flagSpecOf is the flagSpec that ref names in h.
func flagSpecOf(h *flagSetHistory, ref string) (v1beta1.FlagSpec, error) {
	if ref == currentRevision {
		return h.ff.Spec.FlagSpec, nil
	}
	n, _ := strconv.ParseInt(ref, 10, 64)
	r, err := h.revision(n)
	if err != nil {
		return v1beta1.FlagSpec{}, err
	}
	return r.Spec.FlagSpec, nil
}

// diffRevisions is diff ff/NAME --revisions A..B: the change from revision
// A to B of the FeatureFlag, computed as diff -f computes an edit (diff),
// on the cluster's graph with revision A in place of the flag set's spec.
func diffRevisions(cmd *cobra.Command, graph *graphFlags, arg, revisions, contextsFile, output string) error {
	name, _ := flagSetArg(arg)
	from, to, err := revisionRange(revisions)
	if err != nil {
		return err
	}
	if err := checkOutput(output, diffFormats); err != nil {
		return err
	}
	var contexts []evaluate.Context
	if cmd.Flags().Changed("contexts") {
		if contexts, err = readContexts(contextsFile); err != nil {
			return err
		}
	}
	c, ns, reword, err := historyClient(graph.kube)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), graph.timeout)
	defer cancel()
	h, err := readHistory(ctx, c, ns, name)
	if err != nil {
		return reword(err)
	}
	before, err := flagSpecOf(h, from)
	if err != nil {
		return err
	}
	after, err := flagSpecOf(h, to)
	if err != nil {
		return err
	}
	top, _, err := graph.load(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	v := top.Snapshot()
	ff := h.ff
	if held, ok := v.FlagSet(topology.FlagSetKey(ns, name)); ok {
		ff = held
	}
	ffBefore, ffAfter := ff.DeepCopy(), ff.DeepCopy()
	ffBefore.Spec.FlagSpec, ffAfter.Spec.FlagSpec = before, after
	v, err = v.WithFlagSet(ffBefore)
	if err != nil {
		return err
	}
	changes, err := diff(v, []any{ffAfter}, injection.DefaultOptions(), contexts)
	if err != nil {
		return err
	}
	for i := range changes {
		changes[i].Object += fmt.Sprintf(", revision %s to %s", from, to)
	}
	return writeChanges(cmd.OutOrStdout(), changes, output)
}
