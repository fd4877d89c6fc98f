// Package bigflagset makes FeatureFlags of many small flags, and finds the
// largest of them that the API server stores: etcd refuses a request over
// its --max-request-bytes (1.5 MiB by default), and the API server says so
// ("etcdserver: request is too large"). A dry run does not reach etcd, so
// only real creates find the bound.
package bigflagset

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// RequestLimit is etcd's default --max-request-bytes, which the test
// control planes keep.
const RequestLimit = 1_572_864

// Key is the key of flag i: "flag-00000" ... all of one length, so that
// every flag takes the same bytes.
func Key(i int) string { return fmt.Sprintf("flag-%05d", i) }

// FlagSet is a FeatureFlag of count boolean flags (Key(0) ...), enabled,
// defaulting to "on": about 90 bytes each as stored.
func FlagSet(ns, name string, count int) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{}
	ff.Namespace, ff.Name = ns, name
	ff.Spec.FlagSpec.Flags = make(map[string]v1beta1.Flag, count)
	for i := range count {
		ff.Spec.FlagSpec.Flags[Key(i)] = v1beta1.Flag{State: v1beta1.FlagStateEnabled,
			Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "on"}
	}
	return ff
}

// Search is what LargestStored found.
type Search struct {
	// Largest is the count of flags of the largest FlagSet stored.
	Largest int
	// Refusal is the API server's answer to a FlagSet of one more.
	Refusal string
	// Predicted is the count the size of the FlagSet read back predicted.
	Predicted int
	// Creates are the creates the search took.
	Creates int
}

// LargestStored finds, to the flag, the largest count of FlagSet's flags
// that the API server stores in from's namespace, from a FlagSet it
// stored: from, read back. Every flag adds the same bytes to what the API
// server sends etcd (in the spec, and in the managedFields of the create
// when it keeps them), so from's size predicts the count; creates around the prediction
// confirm it, a step at a time and then in doubling steps, and a binary
// search between the last stored and the first refused ends it. Each
// stored probe is deleted again. Probes are created with Create; any
// refusal but etcd's of the size is an error.
func LargestStored(ctx context.Context, c client.Client, from *v1beta1.FeatureFlag) (Search, error) {
	var s Search
	predicted, err := predict(ctx, c, from)
	if err != nil {
		return s, err
	}
	s.Predicted = predicted
	floor := len(from.Spec.FlagSpec.Flags)
	try := func(n int) (bool, error) {
		if n <= floor {
			return true, nil
		}
		ff := FlagSet(from.Namespace, fmt.Sprintf("probe-%d", n), n)
		s.Creates++
		err := Create(ctx, c, ff)
		switch {
		case err == nil:
			return true, c.Delete(ctx, ff)
		case strings.Contains(err.Error(), "request is too large"):
			s.Refusal = err.Error()
			return false, nil
		default:
			return false, fmt.Errorf("creating a FeatureFlag of %d flags: %w", n, err)
		}
	}

	// lo is stored and hi is not, once the steps from the prediction have
	// found both.
	lo, hi := -1, -1
	n := max(predicted, floor+1)
	stored, err := try(n)
	if err != nil {
		return s, err
	}
	for step := 1; lo < 0 || hi < 0; step *= 2 {
		if stored {
			lo, n = n, n+step
		} else {
			hi, n = n, max(n-step, floor)
		}
		if lo >= 0 && hi >= 0 {
			break
		}
		if stored, err = try(n); err != nil {
			return s, err
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := try(mid)
		if err != nil {
			return s, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	if s.Refusal == "" {
		return s, fmt.Errorf("no FeatureFlag of %d flags was refused", hi)
	}
	s.Largest = lo
	return s, nil
}

// attempts is how many times Create sends a create that got no answer.
const attempts = 3

// Create creates o, and tells apart an answer from none: on a machine
// whose cores the API server shares with busy test processes, a create of
// 1.5 MiB can outlast the API server's own request timeout (its 504,
// "request did not complete within requested timeout"), or a webhook's.
// Neither says whether o was stored, nor anything of its size: after
// either, o is read back, and created again when it is not there (up to
// attempts in all); an AlreadyExists after an unanswered create is the
// earlier create, stored. Every answer but these, etcd's refusal of the
// size among them, is returned as it came.
func Create(ctx context.Context, c client.Client, o client.Object) error {
	var err error
	for i := range attempts {
		err = c.Create(ctx, o)
		switch {
		case err == nil:
			return nil
		case i > 0 && apierrors.IsAlreadyExists(err):
			return nil
		case !unanswered(err):
			return err
		}
		if getErr := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)); getErr == nil {
			return nil
		}
	}
	return fmt.Errorf("no answer to %d creates: %w", attempts, err)
}

// unanswered tells a create that timed out, or whose webhook did not
// answer, from an answer.
func unanswered(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || strings.Contains(err.Error(), "failed calling webhook")
}

// predict is the count of flags of the largest FlagSet whose JSON, named
// as the probes are, fits in RequestLimit, from the JSON of from as the
// API server holds it (its status and the status's managedFields left
// out, which a create does not send) and of the same with one flag more.
// etcd's request holds the object's key and a little more (its framing):
// the prediction is a flag or two above the bound at most.
func predict(ctx context.Context, c client.Client, from *v1beta1.FeatureFlag) (int, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1beta1.GroupVersion.WithKind("FeatureFlag"))
	if err := c.Get(ctx, client.ObjectKeyFromObject(from), u); err != nil {
		return 0, fmt.Errorf("reading back %s/%s: %w", from.Namespace, from.Name, err)
	}
	count := len(from.Spec.FlagSpec.Flags)
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "resourceVersion")
	// The create's managedFields, if any, not the status writes'.
	managed, _, err := unstructured.NestedSlice(u.Object, "metadata", "managedFields")
	if err != nil {
		return 0, err
	}
	var fields []any
	for _, mf := range managed {
		if m, ok := mf.(map[string]any); ok && m["subresource"] == nil {
			fields = append(fields, m)
		}
	}
	if err := unstructured.SetNestedSlice(u.Object, fields, "metadata", "managedFields"); err != nil {
		return 0, err
	}
	size := func() (int, error) {
		raw, err := json.Marshal(u.Object)
		return len(raw), err
	}
	before, err := size()
	if err != nil {
		return 0, err
	}
	if addFlag(u.Object, Key(0), Key(count)) == 0 {
		return 0, fmt.Errorf("%s/%s holds no %s", from.Namespace, from.Name, Key(0))
	}
	after, err := size()
	if err != nil {
		return 0, err
	}
	perFlag := after - before
	// etcd's request holds the object's key too, and the probes' names
	// are longer than from's, in the object and in its key.
	probe := fmt.Sprintf("probe-%d", count)
	key := "/registry/" + v1beta1.GroupVersion.Group + "/featureflags/" + from.Namespace + "/" + probe
	named := before + len(probe) - len(from.Name) + len(key)
	return count + (RequestLimit-named)/perFlag, nil
}

// addFlag copies, in every map of v that holds key (or "f:"+key, in
// managedFields), its value to another key, and says in how many maps.
func addFlag(v any, key, another string) int {
	added := 0
	switch v := v.(type) {
	case map[string]any:
		for _, k := range []string{key, "f:" + key} {
			if e, ok := v[k]; ok {
				v[strings.Replace(k, key, another, 1)] = e
				return 1
			}
		}
		for _, e := range v {
			added += addFlag(e, key, another)
		}
	case []any:
		for _, e := range v {
			added += addFlag(e, key, another)
		}
	}
	return added
}
