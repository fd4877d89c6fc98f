package webhooks

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/test/admissionfuzz"
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

// One namespace that holds its share of the budget waits, and is refused
// after the wait; another namespace is judged meanwhile; once the share is
// given back, the first is judged again.
func TestBudgetKeepsOneNamespaceFromTakingAll(t *testing.T) {
	v := flagSetValidators(t)[0]
	v.Budget = NewBudget(DefaultAdmissionBytes, 50*time.Millisecond)
	req := fuzzRequest("FeatureFlag", flagSetJSON(`{"flags":{"f":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"off"}}}`), "", false)

	release, err := v.Budget.Take(context.Background(), "busy", v.Budget.Share())
	if err != nil {
		t.Fatal(err)
	}
	refusedBusy(t, v.Handle(context.Background(), inNamespace(req, "busy")), "other FeatureFlags of namespace busy")
	if resp := v.Handle(context.Background(), inNamespace(req, "other")); !resp.Allowed {
		t.Fatalf("another namespace was not judged while one held its share: %+v", resp.Result)
	}
	release()
	if resp := v.Handle(context.Background(), inNamespace(req, "busy")); !resp.Allowed {
		t.Fatalf("the namespace was not judged once its share was given back: %+v", resp.Result)
	}
	if n := len(v.Budget.shares); n != 0 {
		t.Errorf("%d namespaces keep a share with no admission under way", n)
	}
}

// Two namespaces holding their shares take the whole budget: a third is
// refused, and says so.
func TestBudgetBoundsEveryNamespaceTogether(t *testing.T) {
	v := flagSetValidators(t)[0]
	v.Budget = NewBudget(DefaultAdmissionBytes, 50*time.Millisecond)
	req := fuzzRequest("FeatureFlag", flagSetJSON(`{"flags":{}}`), "", false)
	for _, ns := range []string{"a", "b"} {
		release, err := v.Budget.Take(context.Background(), ns, 10*DefaultAdmissionBytes) // a share at most
		if err != nil {
			t.Fatal(err)
		}
		defer release()
	}
	refusedBusy(t, v.Handle(context.Background(), inNamespace(req, "c")), "FeatureFlags of every namespace")
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

// The spec author reads the same FeatureFlags, old and new, as many at
// once as the API server sends: it takes from the same budget, and waits
// for it likewise; what it does not author takes nothing.
func TestBudgetHoldsTheSpecAuthor(t *testing.T) {
	b := NewBudget(DefaultAdmissionBytes, 50*time.Millisecond)
	author := SpecAuthor{Budget: b}
	red := `{"metadata":{"annotations":{"delivery.flagplane.dev/spec-author":"alice"}},"spec":{"flagSpec":{"flags":{}}}}`
	req := authorRequest("bob", red, red, false)

	release, err := b.Take(context.Background(), "busy", b.Share())
	if err != nil {
		t.Fatal(err)
	}
	refusedBusy(t, author.Handle(context.Background(), inNamespace(req, "busy")), "other FeatureFlags of namespace busy")
	if resp := author.Handle(context.Background(), inNamespace(req, "other")); !resp.Allowed {
		t.Fatalf("another namespace was not authored while one held its share: %+v", resp.Result)
	}
	del := inNamespace(req, "busy")
	del.Operation = admissionv1.Delete
	if resp := author.Handle(context.Background(), del); !resp.Allowed {
		t.Fatalf("a delete waited for the budget: %+v", resp.Result)
	}
	release()
	if resp := author.Handle(context.Background(), inNamespace(req, "busy")); !resp.Allowed {
		t.Fatalf("the namespace was not authored once its share was given back: %+v", resp.Result)
	}
	if n := len(b.shares); n != 0 {
		t.Errorf("%d namespaces keep a share with no admission under way", n)
	}
}
