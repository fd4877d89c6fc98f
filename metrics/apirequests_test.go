package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestClassifyRequest(t *testing.T) {
	for _, tc := range []struct {
		method, url, contentType string
		verb, resource           string
	}{
		{"GET", "/api/v1/namespaces/a/configmaps/b", "", "get", "configmaps"},
		{"GET", "/api/v1/namespaces/a/configmaps", "", "list", "configmaps"},
		{"GET", "/api/v1/configmaps?labelSelector=x", "", "list", "configmaps"},
		{"GET", "/api/v1/configmaps?watch=true&resourceVersion=5", "", "watch", "configmaps"},
		{"GET", "/apis/apps/v1/deployments?watch=1&sendInitialEvents=true", "", "list", "deployments.apps"},
		{"PATCH", "/api/v1/namespaces/a/configmaps/b", "application/apply-patch+yaml", "apply", "configmaps"},
		{"PATCH", "/api/v1/namespaces/a/configmaps/b", "application/merge-patch+json", "patch", "configmaps"},
		{"PUT", "/apis/core.openfeature.dev/v1beta1/namespaces/a/featureflags/b/status", "", "update", "featureflags.core.openfeature.dev/status"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/a/events", "", "create", "events.events.k8s.io"},
		{"DELETE", "/api/v1/namespaces/a/configmaps/b", "", "delete", "configmaps"},
		{"DELETE", "/api/v1/namespaces/a/configmaps", "", "deletecollection", "configmaps"},
		{"GET", "/api/v1/namespaces/a", "", "get", "namespaces"},
		{"PUT", "/api/v1/namespaces/a/finalize", "", "update", "namespaces/finalize"},
		{"GET", "/api/v1/namespaces", "", "list", "namespaces"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/s/leases/l", "", "update", "leases.coordination.k8s.io"},
		{"GET", "/apis/apps/v1", "", "get", ""},
		{"GET", "/version", "", "get", ""},
	} {
		t.Run(tc.method+" "+tc.url, func(t *testing.T) {
			g := NewWithT(t)
			req := httptest.NewRequest(tc.method, tc.url, nil)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			verb, resource := ClassifyRequest(req)
			g.Expect(verb).To(Equal(tc.verb))
			g.Expect(resource).To(Equal(tc.resource))
		})
	}
}

type fixedTransport int

func (f fixedTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: int(f), Body: http.NoBody}, nil
}

func TestAPIRequestsCountsThroughTheTransport(t *testing.T) {
	g := NewWithT(t)
	a := NewAPIRequests()
	rt := a.WrapTransport(fixedTransport(200))
	do := func(method, url string) {
		resp, err := rt.RoundTrip(httptest.NewRequest(method, url, nil))
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
	}
	do("GET", "/api/v1/namespaces/a/configmaps/b")
	before := a.Snapshot()
	do("PUT", "/api/v1/namespaces/a/configmaps/b")
	do("PUT", "/api/v1/namespaces/a/configmaps/c")
	do("GET", "/api/v1/configmaps?watch=true")

	since := a.Snapshot().Sub(before)
	g.Expect(since).To(Equal(APIRequestCounts{
		{Verb: "update", Resource: "configmaps", Code: 200}: 2,
		{Verb: "watch", Resource: "configmaps", Code: 200}:  1,
	}))
	g.Expect(since.Writes()).To(Equal(2))
	g.Expect(since.Reads()).To(Equal(1))
	g.Expect(since.String()).To(ContainSubstring("configmaps"))

	reg := prometheus.NewRegistry()
	g.Expect(reg.Register(a)).To(Succeed())
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP flagplane_api_requests_total Requests the manager made to the API server, by verb (get, list, watch, create, update, patch, apply, delete), resource and HTTP status code (0: no answer). A watch counts when it starts.
# TYPE flagplane_api_requests_total counter
flagplane_api_requests_total{code="200",resource="configmaps",verb="get"} 1
flagplane_api_requests_total{code="200",resource="configmaps",verb="update"} 2
flagplane_api_requests_total{code="200",resource="configmaps",verb="watch"} 1
`), "flagplane_api_requests_total")).To(Succeed())
}
