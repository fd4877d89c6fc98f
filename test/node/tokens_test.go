package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestTokenRefreshAt80PercentOfItsLife(t *testing.T) {
	g := NewWithT(t)
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.Expect(token{issued: issued, expires: issued.Add(10 * time.Minute)}.refreshAt()).To(Equal(issued.Add(8 * time.Minute)))
	// A token the API server extended to a year is still replaced daily.
	g.Expect(token{issued: issued, expires: issued.Add(365 * 24 * time.Hour)}.refreshAt()).To(Equal(issued.Add(24 * time.Hour)))
}

func TestPodTokensRequestBoundTokensAndRotateThem(t *testing.T) {
	g := NewWithT(t)
	client := fake.NewClientset()
	var requests []*authenticationv1.TokenRequest
	var mu sync.Mutex
	client.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		mu.Lock()
		requests = append(requests, tr)
		n := len(requests)
		mu.Unlock()
		// A one-second token: due for rotation after 800 ms.
		tr.Status = authenticationv1.TokenRequestStatus{
			Token: fmt.Sprintf("token-%d", n), ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Second)),
		}
		return true, tr, nil
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "uid-1"}}
	due := make(chan struct{}, 1)
	tokens := newPodTokens(client, pod, func() { due <- struct{}{} })
	defer tokens.close()
	k := tokenKey{serviceAccount: "web", audience: "flagplane", expiration: 600}

	g.Expect(tokens.get(context.Background(), k)).To(Equal("token-1"))
	g.Expect(tokens.get(context.Background(), k)).To(Equal("token-1"), "cached until due")
	mu.Lock()
	g.Expect(requests).To(HaveLen(1))
	g.Expect(requests[0].Spec.Audiences).To(Equal([]string{"flagplane"}))
	g.Expect(requests[0].Spec.ExpirationSeconds).To(HaveValue(BeEquivalentTo(600)))
	g.Expect(requests[0].Spec.BoundObjectRef).To(HaveValue(Equal(authenticationv1.BoundObjectReference{
		APIVersion: "v1", Kind: "Pod", Name: "web-1", UID: "uid-1"})))
	mu.Unlock()

	g.Eventually(due).WithTimeout(5*time.Second).Should(Receive(), "the rotation was never asked for")
	g.Expect(tokens.get(context.Background(), k)).To(Equal("token-2"))
}
