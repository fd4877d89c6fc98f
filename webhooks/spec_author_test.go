package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
)

// authorRequest is a create of object by user, or, with old, an update.
func authorRequest(user, object, old string, dryRun bool) admission.Request {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "author", Operation: admissionv1.Create, Namespace: "shop", DryRun: ptr.To(dryRun),
		UserInfo: authenticationv1.UserInfo{Username: user},
		Object:   runtime.RawExtension{Raw: []byte(object)},
	}}
	if old != "" {
		req.Operation = admissionv1.Update
		req.OldObject = runtime.RawExtension{Raw: []byte(old)}
	}
	return req
}

// authorAfter is the spec author of object once resp's patch is applied,
// and whether it has one.
func authorAfter(t testing.TB, object string, resp admission.Response) (string, bool) {
	t.Helper()
	if !resp.Allowed {
		t.Fatalf("refused: %v", resp.Result)
	}
	patched := []byte(object)
	if len(resp.Patches) > 0 {
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if patched, err = patch.Apply(patched); err != nil {
			t.Fatalf("applying %s to %s: %v", ops, object, err)
		}
	}
	got, err := decodeAuthored(patched)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := got.annotations[deliveryv1alpha1.SpecAuthorAnnotation]
	return a, ok
}

func TestSpecAuthor(t *testing.T) {
	const (
		red   = `"spec":{"flagSpec":{"flags":{"f":{"state":"ENABLED","variants":{"v":"red"},"defaultVariant":"v"}}}}`
		green = `"spec":{"flagSpec":{"flags":{"f":{"state":"ENABLED","variants":{"v":"green"},"defaultVariant":"v"}}}}`
		// The same spec, its keys in another order and its spaces other.
		redAgain = `"spec":{ "flagSpec":{"flags":{"f":{"defaultVariant":"v", "variants":{"v":"red"},"state":"ENABLED"}}}}`
		// Numbers that float64 cannot tell apart are two specs.
		big     = `"spec":{"flagSpec":{"flags":{"f":{"state":"ENABLED","variants":{"v":9007199254740993},"defaultVariant":"v"}}}}`
		bigLess = `"spec":{"flagSpec":{"flags":{"f":{"state":"ENABLED","variants":{"v":9007199254740992},"defaultVariant":"v"}}}}`
	)
	obj := func(annotations, spec string) string {
		meta := `"metadata":{"name":"flags","namespace":"shop"`
		if annotations != "" {
			meta += `,"annotations":` + annotations
		}
		return `{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag",` + meta + `},` + spec + `}`
	}
	authoredBy := func(user string) string {
		return `{"delivery.flagplane.dev/spec-author":"` + user + `","delivery.flagplane.dev/change-cause":"why"}`
	}
	tests := []struct {
		name, user, object, old string
		want                    string
		wantPresent             bool
	}{
		{name: "a create is its user's", user: "alice", object: obj("", red), want: "alice", wantPresent: true},
		{name: "a create that names another author is its user's", user: "alice", object: obj(authoredBy("mallory"), red),
			want: "alice", wantPresent: true},
		{name: "a create by a ServiceAccount", user: "system:serviceaccount:argocd:argocd-application-controller", object: obj(`{"a":"b"}`, red),
			want: "system:serviceaccount:argocd:argocd-application-controller", wantPresent: true},
		{name: "a change of the spec is its user's", user: "bob", object: obj(authoredBy("alice"), green), old: obj(authoredBy("alice"), red),
			want: "bob", wantPresent: true},
		{name: "a change of the spec that forges the author is its user's", user: "bob", object: obj(authoredBy("alice"), green),
			old: obj(authoredBy("carol"), red), want: "bob", wantPresent: true},
		{name: "a change of a number past float64's precision is a change", user: "bob", object: obj(authoredBy("alice"), big),
			old: obj(authoredBy("alice"), bigLess), want: "bob", wantPresent: true},
		{name: "a write of the annotation alone is undone", user: "mallory", object: obj(authoredBy("ceo"), red),
			old: obj(authoredBy("alice"), red), want: "alice", wantPresent: true},
		{name: "the same spec spelled otherwise is no change", user: "mallory", object: obj(authoredBy("mallory"), redAgain),
			old: obj(authoredBy("alice"), red), want: "alice", wantPresent: true},
		{name: "a label written keeps the author", user: "mallory", object: obj(authoredBy("alice"), red), old: obj(authoredBy("alice"), red),
			want: "alice", wantPresent: true},
		{name: "the annotation removed alone comes back", user: "mallory", object: obj(`{"x":"y"}`, red), old: obj(authoredBy("alice"), red),
			want: "alice", wantPresent: true},
		{name: "every annotation removed: the author comes back", user: "mallory", object: obj("", red), old: obj(authoredBy("alice"), red),
			want: "alice", wantPresent: true},
		{name: "no author before, none written by hand", user: "mallory", object: obj(authoredBy("alice"), red), old: obj("", red)},
		{name: "no author before, none now", user: "mallory", object: obj("", red), old: obj("", red)},
		{name: "no user: no author", user: "", object: obj(authoredBy("alice"), red)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			for _, dryRun := range []bool{false, true} {
				resp := SpecAuthor{}.Handle(context.Background(), authorRequest(tt.user, tt.object, tt.old, dryRun))
				got, present := authorAfter(t, tt.object, resp)
				g.Expect(present).To(Equal(tt.wantPresent), "dry run %t", dryRun)
				g.Expect(got).To(Equal(tt.want), "dry run %t", dryRun)
			}
		})
	}

	g := NewWithT(t)
	resp := SpecAuthor{}.Handle(context.Background(), authorRequest("alice", obj(authoredBy("alice"), red), "", false))
	g.Expect(resp.Allowed).To(BeTrue())
	g.Expect(resp.Patches).To(BeEmpty(), "nothing to change")
	resp = SpecAuthor{}.Handle(context.Background(), authorRequest("alice", `{"metadata":`, "", false))
	g.Expect(resp.Allowed).To(BeFalse())
	g.Expect(resp.Result.Code).To(Equal(int32(400)))
	for _, bad := range []string{`null`, `[]`, `{"metadata":1}`, `{"metadata":{"annotations":[]}}`} {
		resp = SpecAuthor{}.Handle(context.Background(), authorRequest("alice", bad, "", false))
		g.Expect(resp.Allowed).To(BeFalse(), bad)
	}
	// Keys are read by their exact names, as the API server writes them.
	odd := `{"Metadata":{"annotations":{"delivery.flagplane.dev/spec-author":"ceo"}},"spec":{}}`
	got, present := authorAfter(t, odd, SpecAuthor{}.Handle(context.Background(), authorRequest("alice", odd, "", false)))
	g.Expect(present).To(BeTrue())
	g.Expect(got).To(Equal("alice"))
	del := authorRequest("alice", obj("", red), "", false)
	del.Operation = admissionv1.Delete
	g.Expect(SpecAuthor{}.Handle(context.Background(), del).Allowed).To(BeTrue())
}

// FuzzSpecAuthor: whatever a FeatureFlag create or update carries, the
// spec-author webhook answers in time and clearly, and its patch applies:
// the author is the user's when the spec changes (or on a create), else the
// old object's.
func FuzzSpecAuthor(f *testing.F) {
	red := `{"metadata":{"annotations":{"delivery.flagplane.dev/spec-author":"alice"}},"spec":{"flagSpec":{"flags":{}}}}`
	f.Add("bob", red, "", false)
	f.Add("bob", red, red, true)
	f.Add("", `{"metadata":{"annotations":null},"spec":null}`, `{"spec":1}`, true)
	f.Add("mallory", `{"metadata":{"annotations":{"delivery.flagplane.dev/spec-author":"x"}},"spec":{"a":1e400}}`, red, true)
	f.Add("\u202eevil", `{"metadata":{"annotations":{"delivery.flagplane.dev~1spec-author":"x"}}}`, `{}`, true)
	reportTimings(f)
	f.Fuzz(func(t *testing.T, user, object, old string, update bool) {
		req := fuzzRequest("FeatureFlag", object, old, update)
		req.UserInfo.Username = user
		resp := judge(t, SpecAuthorPath, SpecAuthor{}, req, object)
		if !resp.Allowed {
			return // an object that does not decode
		}
		// The oracle reads the objects its own way: by exact key, into
		// values with numbers as written, compared as JSON.
		var before, was map[string]any
		if decodeExact([]byte(object), &before) != nil {
			t.Fatalf("allowed an object that does not decode: %s", object)
		}
		got, present := authorAfter(t, object, resp)
		// The user as JSON carries it (each invalid byte is U+FFFD).
		want, wantPresent := asJSONString(user), user != ""
		if update && decodeExact([]byte(old), &was) == nil && jsonEqual(before["spec"], was["spec"]) {
			want, wantPresent = "", false
			if meta, ok := was["metadata"].(map[string]any); ok {
				if annotations, ok := meta["annotations"].(map[string]any); ok {
					if v, ok := annotations[deliveryv1alpha1.SpecAuthorAnnotation].(string); ok {
						want, wantPresent = v, true
					}
				}
			}
		}
		if present != wantPresent || got != want {
			t.Fatalf("author %q (%t), want %q (%t)\nobject %s\nold %s", got, present, want, wantPresent, object, old)
		}
	})
}

// asJSONString is s as a JSON string carries it: encoding/json writes
// U+FFFD for each byte that is not part of valid UTF-8 (one per byte, where
// strings.ToValidUTF8 writes one per run of them).
func asJSONString(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

func jsonEqual(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && string(x) == string(y)
}

// decodeExact decodes JSON keeping numbers as they were written: two specs
// that differ only in a digit past float64's precision are two specs.
func decodeExact(raw []byte, into any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(into)
}

// TestSameSpec: two specs are the same when they are equal as JSON values
// (members in any order, the last of a repeated name), numbers as
// written; FuzzSpecAuthor checks the rest against decoded values.
func TestSameSpec(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{`{"a":1,"b":[1,2]}`, `{"a":1,"b":[1,2]}`, true},
		{`{"a":1,"b":{"x":true,"y":null}}`, ` { "b" : {"y":null,"x":true}, "a":1 } `, true},
		{`{"a":1,"a":2}`, `{"a":2}`, true},
		{``, `null`, true},
		{`{"a":1e400}`, `{"a":1e400}`, true},
		{`{"a":"\u00e9"}`, `{"a":"é"}`, true},
		{`{"a":1}`, `{"a":1.0}`, false},
		{`{"a":[1,2]}`, `{"a":[2,1]}`, false},
		{`{"a":[]}`, `{"a":{}}`, false},
		{`{"a":"1"}`, `{"a":1}`, false},
		{`{"a":null}`, `{}`, false},
		{`{"ab":"c"}`, `{"a":"bc"}`, false},
		{`[["a"],"b"]`, `[["a","b"]]`, false},
		{`{"a":false}`, `{"a":true}`, false},
		{``, `{}`, false},
	} {
		got, err := sameSpec(json.RawMessage(c.a), json.RawMessage(c.b))
		if err != nil || got != c.same {
			t.Errorf("sameSpec(%s, %s) = %t, %v; want %t", c.a, c.b, got, err, c.same)
		}
	}
	for _, bad := range []string{`{"a":`, `{"a":1} 2`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001)} {
		if _, err := sameSpec(json.RawMessage(`{}`), json.RawMessage(bad)); err == nil {
			t.Errorf("sameSpec of %.40s: no error", bad)
		}
	}
}
