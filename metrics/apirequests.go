package metrics

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// APIRequest is one kind of request to the API server: its verb (get, list,
// watch, create, update, patch, apply, delete, deletecollection), the
// resource it is about ("configmaps", "featureflags.core.openfeature.dev/status",
// "leases.coordination.k8s.io"; "" for discovery and other non-resource
// paths) and the HTTP status code of the answer (0 when none came).
type APIRequest struct {
	Verb     string
	Resource string
	Code     int
}

// Read tells whether the request reads: get, list or watch.
func (r APIRequest) Read() bool {
	return r.Verb == "get" || r.Verb == "list" || r.Verb == "watch"
}

// Write tells whether the request asks for a change.
func (r APIRequest) Write() bool {
	switch r.Verb {
	case "create", "update", "patch", "apply", "delete", "deletecollection":
		return true
	}
	return false
}

// ClassifyRequest names the verb and resource of a request to the API
// server, as its audit log would, from its method, path and query:
//
//   - GET of one object is get, of a collection list; with watch=true it is
//     watch, unless it asks for the initial state (sendInitialEvents=true):
//     that is the streamed form of a list, and a list it is called here;
//   - PATCH with a server-side apply body is apply;
//   - DELETE of a collection is deletecollection.
func ClassifyRequest(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// /api/v1/... or /apis/<group>/<version>/...
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return strings.ToLower(req.Method), ""
	}
	// namespaces/<ns>/<resource>/..., unless it is the namespace itself
	// or one of its own subresources (as the API server's RequestInfo reads it).
	if len(parts) >= 3 && parts[0] == "namespaces" && parts[2] != "status" && parts[2] != "finalize" {
		parts = parts[2:]
	}
	resource = parts[0]
	if group != "" {
		resource += "." + group
	}
	named := len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	q := req.URL.Query()
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case isTrue(q.Get("watch")) && isTrue(q.Get("sendInitialEvents")):
			verb = "list"
		case isTrue(q.Get("watch")):
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			verb = "apply"
		}
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb, resource
}

func isTrue(s string) bool { return s == "true" || s == "1" }

// APIRequests counts the requests a rest.Config's clients make, by verb,
// resource and status code: install it with rest.Config.Wrap(a.WrapTransport)
// and every client built from the config (the manager's cache, its client,
// leader election, the event recorder) is counted. It is safe for
// concurrent use, and a prometheus.Collector of
// flagplane_api_requests_total.
type APIRequests struct {
	mu     sync.Mutex
	counts map[APIRequest]int
}

var _ prometheus.Collector = (*APIRequests)(nil)

var apiRequestsDesc = prometheus.NewDesc(namespace+"_api_requests_total",
	"Requests the manager made to the API server, by verb (get, list, watch, create, update, patch, apply, delete), resource and HTTP status code (0: no answer). A watch counts when it starts.",
	[]string{"verb", "resource", "code"}, nil)

// NewAPIRequests returns an empty count.
func NewAPIRequests() *APIRequests { return &APIRequests{counts: map[APIRequest]int{}} }

// WrapTransport counts every request that passes rt; it has the signature
// of rest.Config.WrapTransport.
func (a *APIRequests) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{next: rt, counts: a}
}

// Add counts one request.
func (a *APIRequests) Add(r APIRequest) {
	a.mu.Lock()
	a.counts[r]++
	a.mu.Unlock()
}

// Snapshot returns the counts so far.
func (a *APIRequests) Snapshot() APIRequestCounts {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.counts)
}

// Describe implements prometheus.Collector.
func (a *APIRequests) Describe(ch chan<- *prometheus.Desc) { ch <- apiRequestsDesc }

// Collect implements prometheus.Collector.
func (a *APIRequests) Collect(ch chan<- prometheus.Metric) {
	for r, n := range a.Snapshot() {
		ch <- prometheus.MustNewConstMetric(apiRequestsDesc, prometheus.CounterValue, float64(n), r.Verb, r.Resource, strconv.Itoa(r.Code))
	}
}

type countingTransport struct {
	next   http.RoundTripper
	counts *APIRequests
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := ClassifyRequest(req)
	resp, err := t.next.RoundTrip(req)
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	t.counts.Add(APIRequest{Verb: verb, Resource: resource, Code: code})
	return resp, err
}

// APIRequestCounts are counts of requests.
type APIRequestCounts map[APIRequest]int

// Sub returns the counts of c that are not in before: what happened since.
func (c APIRequestCounts) Sub(before APIRequestCounts) APIRequestCounts {
	out := APIRequestCounts{}
	for r, n := range c {
		if d := n - before[r]; d != 0 {
			out[r] = d
		}
	}
	return out
}

// Count sums the requests for which match is true (all when match is nil).
func (c APIRequestCounts) Count(match func(APIRequest) bool) int {
	n := 0
	for r, k := range c {
		if match == nil || match(r) {
			n += k
		}
	}
	return n
}

// Reads are the gets, lists and watches.
func (c APIRequestCounts) Reads() int { return c.Count(APIRequest.Read) }

// Writes are the requests that ask for a change.
func (c APIRequestCounts) Writes() int { return c.Count(APIRequest.Write) }

// String renders the counts as a table, one request kind a line, sorted.
func (c APIRequestCounts) String() string {
	if len(c) == 0 {
		return "(no requests)\n"
	}
	keys := slices.SortedFunc(maps.Keys(c), func(a, b APIRequest) int {
		if x := strings.Compare(a.Resource, b.Resource); x != 0 {
			return x
		}
		if x := strings.Compare(a.Verb, b.Verb); x != 0 {
			return x
		}
		return a.Code - b.Code
	})
	var b strings.Builder
	for _, r := range keys {
		res := r.Resource
		if res == "" {
			res = "(non-resource)"
		}
		fmt.Fprintf(&b, "%-50s %-16s %3d  %d\n", res, r.Verb, r.Code, c[r])
	}
	return b.String()
}
