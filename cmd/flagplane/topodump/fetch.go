package topodump

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TopologyPath is where the manager serves its topology.
const TopologyPath = "/debug/topology"

// maxDOT bounds what is read from a manager: a graph of a million nodes is
// well below it.
const maxDOT = 512 << 20

// FromURL reads the topology from a manager's metrics address. url may be
// the address alone (http://host:8080), to which TopologyPath is added, or
// the full URL of the endpoint.
func FromURL(ctx context.Context, url string) ([]byte, error) {
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	if !strings.HasSuffix(strings.TrimSuffix(url, "/"), TopologyPath) {
		url = strings.TrimSuffix(url, "/") + TopologyPath
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("requesting %s: %w", url, err)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the topology from %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDOT))
	if err != nil {
		return nil, fmt.Errorf("reading the topology from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the topology from %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return checkDOT(body, url)
}

// Service locates a manager's metrics Service.
type Service struct {
	Namespace string
	Name      string
	// Port is the Service's port, by name or number.
	Port string
}

// DefaultService is the metrics Service of config/default.
var DefaultService = Service{Namespace: "flagplane-system", Name: "flagplane-metrics", Port: "metrics"}

func (s Service) String() string { return s.Namespace + "/" + s.Name + ":" + s.Port }

// FromService reads the topology through the API server's service proxy,
// which forwards to one ready endpoint of the Service. The caller needs
// `get services/proxy` on it; nothing is exposed outside the cluster.
func FromService(ctx context.Context, cfg *rest.Config, svc Service) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	body, err := cs.CoreV1().Services(svc.Namespace).ProxyGet("http", svc.Name, svc.Port, TopologyPath, nil).DoRaw(ctx)
	if err != nil {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		if msg != "" {
			return nil, fmt.Errorf("reading the topology through the service proxy of %s: %w (%s)", svc, err, msg)
		}
		return nil, fmt.Errorf("reading the topology through the service proxy of %s: %w", svc, err)
	}
	return checkDOT(body, "service "+svc.String())
}

// checkDOT refuses an answer that is not a DOT digraph (a login page, a
// proxy's error page), so that it is not rendered as if it were.
func checkDOT(b []byte, from string) ([]byte, error) {
	if !strings.HasPrefix(strings.TrimSpace(string(b)), "digraph") {
		head := string(b)
		if len(head) > 120 {
			head = head[:120] + "..."
		}
		return nil, fmt.Errorf("%s did not answer with a Graphviz digraph: %q", from, head)
	}
	return b, nil
}
