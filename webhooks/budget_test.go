package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/test/admissionfuzz"
	"github.com/flagplane/flagplane/workflows/injection"
)

// inNamespace is req as an admission in namespace ns.
func inNamespace(req admission.Request, ns string) admission.Request {
	req.Namespace = ns
	return req
}

// refusedBusy fails t unless resp refuses with 429 and says what.
func refusedBusy(t *testing.T, resp admission.Response, says string) {
	t.Helper()
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusTooManyRequests {
		t.Fatalf("want a refusal with 429, got allowed=%v %+v", resp.Allowed, resp.Result)
	}
	// What the API server makes of it: the status a client reads.
	if err := (&apierrors.StatusError{ErrStatus: *resp.Result}); !apierrors.IsTooManyRequests(err) || resp.Result.Reason != metav1.StatusReasonTooManyRequests {
		t.Errorf("a client does not read TooManyRequests from %+v", resp.Result)
	}
	if !strings.Contains(resp.Result.Message, says) {
		t.Errorf("the refusal %q does not say %q", resp.Result.Message, says)
	}
	if err := admissionfuzz.Response(resp.AdmissionResponse); err != nil {
		t.Error(err)
	}
}

// reviewOf is req as the API server sends it: an AdmissionReview, its
// request's uid first.
func reviewOf(tb testing.TB, req admission.Request) []byte {
	tb.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// serveBudgeted serves h behind budget, as Setup does the FeatureFlag
// webhooks, and returns a function that sends it req as the API server
// does (an AdmissionReview, its request's uid first) and returns its
// answer.
func serveBudgeted(t *testing.T, budget *Budget, h admission.Handler) func(admission.Request) admission.Response {
	srv := httptest.NewServer(budgeted{budget, &admission.Webhook{Handler: h}})
	t.Cleanup(srv.Close)
	return func(req admission.Request) admission.Response {
		t.Helper()
		resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(reviewOf(t, req)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || review.Response == nil {
			t.Fatalf("no AdmissionReview answered (%s): %v", resp.Status, err)
		}
		if review.Response.UID != req.UID {
			t.Fatalf("answered uid %q, want the request's %q", review.Response.UID, req.UID)
		}
		return admission.Response{AdmissionResponse: *review.Response}
	}
}

// One namespace that holds its share of the budget waits, and is refused
// after the wait; another namespace is judged meanwhile; once the share is
// given back, the first is judged again. So for the validator, and for
// the spec author, which reads the same requests before it.
func TestBudgetKeepsOneNamespaceFromTakingAll(t *testing.T) {
	red := `{"metadata":{"annotations":{"delivery.flagplane.dev/spec-author":"alice"}},"spec":{"flagSpec":{"flags":{}}}}`
	for _, c := range []struct {
		name string
		h    admission.Handler
		req  admission.Request
	}{
		{"validator", flagSetValidators(t)[0], fuzzRequest("FeatureFlag", flagSetJSON(`{"flags":{"f":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"off"}}}`), "", false)},
		{"spec author", SpecAuthor{}, authorRequest("bob", red, red, false)},
	} {
		t.Run(c.name, func(t *testing.T) {
			budget := NewBudget(DefaultAdmissionBytes, 50*time.Millisecond)
			send := serveBudgeted(t, budget, c.h)
			release, err := budget.Take(context.Background(), "busy", budget.Share())
			if err != nil {
				t.Fatal(err)
			}
			refusedBusy(t, send(inNamespace(c.req, "busy")), "other FeatureFlags of namespace busy")
			if resp := send(inNamespace(c.req, "other")); !resp.Allowed {
				t.Fatalf("another namespace was not judged while one held its share: %+v", resp.Result)
			}
			release()
			if resp := send(inNamespace(c.req, "busy")); !resp.Allowed {
				t.Fatalf("the namespace was not judged once its share was given back: %+v", resp.Result)
			}
			if n := len(budget.shares); n != 0 {
				t.Errorf("%d namespaces keep a share with no admission under way", n)
			}
		})
	}
}

// Two namespaces holding their shares take the whole budget: a third is
// refused, and says so.
func TestBudgetBoundsEveryNamespaceTogether(t *testing.T) {
	budget := NewBudget(DefaultAdmissionBytes, 50*time.Millisecond)
	send := serveBudgeted(t, budget, flagSetValidators(t)[0])
	req := fuzzRequest("FeatureFlag", flagSetJSON(`{"flags":{}}`), "", false)
	for _, ns := range []string{"a", "b"} {
		release, err := budget.Take(context.Background(), ns, 10*DefaultAdmissionBytes) // a share at most
		if err != nil {
			t.Fatal(err)
		}
		defer release()
	}
	refusedBusy(t, send(inNamespace(req, "c")), "FeatureFlags of every namespace")
}

// A request that waits for its bytes holds no more of itself than its
// head: the rest is read once it has them, and not at all when it is
// refused; and it counts at its whole size, read as decoded.
func TestBudgetReadsARequestInTurn(t *testing.T) {
	budget := NewBudget(DefaultAdmissionBytes, 50*time.Millisecond)
	object := unread(manyFlags(20000, okFlag+"}")) // over 1 MiB
	req := inNamespace(fuzzRequest("FeatureFlag", object, "", false), "busy")
	body := reviewOf(t, req)
	judged := false
	h := budgeted{budget, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		judged = true
		if all, err := io.ReadAll(r.Body); err != nil || !bytes.Equal(all, body) {
			t.Errorf("the handler read %d bytes of the %d sent (%v)", len(all), len(body), err)
		}
	})}
	release, err := budget.Take(context.Background(), "busy", budget.Share())
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingReader{r: bytes.NewReader(body)}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", counted))
	if judged || counted.n > maxHead {
		t.Errorf("a refused request was read %d bytes deep (judged: %t), want its head of at most %d", counted.n, judged, maxHead)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil || review.Response.UID != req.UID {
		t.Fatalf("the refusal is no AdmissionReview of the request's uid: %v %s", err, rec.Body.String())
	}
	refusedBusy(t, admission.Response{AdmissionResponse: *review.Response}, "other FeatureFlags of namespace busy")
	release()

	// Its bytes are taken whole: one more byte of the namespace waits.
	h.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		judged = true
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Error(err)
		}
		if _, err := budget.Take(context.Background(), "busy", 1); err == nil {
			t.Error("took a byte of a share that a request at least as large holds")
		}
	})
	counted = &countingReader{r: bytes.NewReader(body)}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", counted))
	if !judged || counted.n != len(body) {
		t.Errorf("judged: %t, read %d of %d bytes", judged, counted.n, len(body))
	}

	// What is not an AdmissionReview of the API server's is refused unread.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"request":{"object":{}}}`)))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("a request with no uid: %d, want 400", rec.Code)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// requestHead reads the uid and namespace as the API server writes them,
// whatever comes before them.
func TestRequestHead(t *testing.T) {
	for in, want := range map[string][2]string{
		`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u1","kind":{"group":"g"},"name":"n","namespace":"ns","object":{}}}`: {"u1", "ns"},
		`{"request":{"uid":"u2","userInfo":{"groups":["a",["b"]]},"object":{"metadata":{"namespace":"not this"}}}}`:                                         {"u2", ""},
		`{"request":{"namespace":"ns","uid":"u3"}}`: {"u3", "ns"},
	} {
		uid, ns, err := requestHead(strings.NewReader(in))
		if err != nil || uid != want[0] || ns != want[1] {
			t.Errorf("requestHead(%s) = %q, %q, %v; want %q, %q", in, uid, ns, err, want[0], want[1])
		}
	}
	for _, bad := range []string{``, `[]`, `{"request":[]}`, `{"response":{}}`, `{"request":{"object":{},"uid":"late"}}`, `{"request":{"uid":1}}`} {
		if uid, _, err := requestHead(strings.NewReader(bad)); err == nil {
			t.Errorf("requestHead(%s) = %q, no error", bad, uid)
		}
	}
}

// An admission whose client has gone stops waiting then.
func TestBudgetStopsWaitingWithTheRequest(t *testing.T) {
	b := NewBudget(DefaultAdmissionBytes, time.Hour)
	release, err := b.Take(context.Background(), "a", b.Share())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := b.Take(ctx, "a", 1); err == nil {
		t.Fatal("took bytes of a share that was held")
	}
}

// Pods have a budget of their own, taken as the FeatureFlags' is: a
// namespace whose pods hold its share waits, and is refused with 429 that
// names pods; another namespace's pod is admitted meanwhile.
func TestBudgetHoldsPods(t *testing.T) {
	reader := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(replicaSetMeta("shop", "web-5d4f8", "web")).Build()
	budget := NewBudget(DefaultAdmissionBytes, 50*time.Millisecond).For("pods")
	send := serveBudgeted(t, budget, newMutator(t, reader, &recordingEnsurer{}))
	pod := request(t, admissionv1.Create, podOwnedBy("ReplicaSet", "web-5d4f8", map[string]string{"app": "web", "pod-template-hash": "5d4f8"}), false)

	release, err := budget.Take(context.Background(), "shop", budget.Share())
	if err != nil {
		t.Fatal(err)
	}
	refusedBusy(t, send(pod), "other pods of namespace shop")
	if resp := send(inNamespace(pod, "other")); !resp.Allowed {
		t.Fatalf("another namespace's pod was not admitted while shop held its share: %+v", resp.Result)
	}
	release()
	if resp := send(pod); !resp.Allowed || !strings.Contains(string(resp.Patch), injection.SidecarName) {
		t.Fatalf("the pod was not injected once the share was given back: %+v", resp.AdmissionResponse)
	}
}
