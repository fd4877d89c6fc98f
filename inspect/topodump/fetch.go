package topodump

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"
)

// TopologyPath is where the manager serves its topology.
const TopologyPath = "/debug/topology"

// maxDOT bounds what is read from a manager: a graph of a million nodes is
// well below it.
const maxDOT = 512 << 20

// URLOptions are how FromURL reaches a manager's metrics address.
type URLOptions struct {
	// Token is sent as a bearer token. A manager with secure metrics (the
	// default) answers only to a token the API server authenticates, of an
	// identity that may get /debug/topology (ClusterRole
	// flagplane-metrics-reader).
	Token string
	// CAFile verifies the manager's serving certificate; empty uses the
	// system's roots.
	CAFile string
	// InsecureSkipTLSVerify accepts any serving certificate, such as the
	// self-signed one a manager serves without --metrics-cert-dir.
	InsecureSkipTLSVerify bool
}

// FromURL reads the topology from a manager's metrics address. url may be
// the address alone (https://host:8443), to which TopologyPath is added, or
// the full URL of the endpoint; without a scheme it is https.
func FromURL(ctx context.Context, url string, o URLOptions) ([]byte, error) {
	url = endpoint(url, TopologyPath)
	body, err := get(ctx, url, TopologyPath, "the topology", o)
	if err != nil {
		return nil, err
	}
	return checkDOT(body, url)
}

// ExplainPath is where a manager explains an object.
const ExplainPath = "/debug/explain"

// NotInGraphHeader marks a 404 of ExplainPath that says the object is not
// in the manager's graph (rather than that the endpoint does not exist).
const NotInGraphHeader = "Flagplane-Not-In-Graph"

// ExplainFromURL asks a manager at its metrics address (as for FromURL) to
// explain one object, computed with the manager's own injection options; it
// returns the manager's JSON report.
func ExplainFromURL(ctx context.Context, url, kind, namespace, name string, o URLOptions) ([]byte, error) {
	base := endpoint(strings.TrimSuffix(strings.TrimSuffix(url, "/"), TopologyPath), ExplainPath)
	q := neturl.Values{"kind": {kind}, "namespace": {namespace}, "name": {name}}
	return get(ctx, base+"?"+q.Encode(), ExplainPath, "the explanation", o)
}

// endpoint is url with path added unless it ends with it; https unless a
// scheme is given.
func endpoint(url, path string) string {
	if !strings.Contains(url, "://") {
		url = "https://" + url
	}
	if !strings.HasSuffix(strings.TrimSuffix(url, "/"), path) {
		url = strings.TrimSuffix(url, "/") + path
	}
	return url
}

// get reads what of a manager's endpoints at url, with its bearer token.
func get(ctx context.Context, url, path, what string, o URLOptions) ([]byte, error) {
	client, err := o.httpClient()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("requesting %s: %w", url, err)
	}
	if o.Token != "" {
		if strings.HasPrefix(url, "http://") {
			return nil, fmt.Errorf("not sending a token to %s in clear text: use https", url)
		}
		req.Header.Set("Authorization", "Bearer "+o.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		var hint string
		if strings.Contains(err.Error(), "certificate") {
			hint = " (a manager without --metrics-cert-dir serves a self-signed certificate: --insecure-skip-tls-verify, or --certificate-authority)"
		}
		return nil, fmt.Errorf("reading %s from %s: %w%s", what, url, err, hint)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDOT))
	if err != nil {
		return nil, fmt.Errorf("reading %s from %s: %w", what, url, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("reading %s from %s: %s: the manager answers only to a bearer token the API server authenticates (--token or --token-file)", what, url, resp.Status)
	case http.StatusForbidden:
		return nil, fmt.Errorf("reading %s from %s: %s: %s: the token's identity may not get %s (bind it to the ClusterRole flagplane-metrics-reader)",
			what, url, resp.Status, strings.TrimSpace(string(body)), path)
	case http.StatusNotFound:
		if resp.Header.Get(NotInGraphHeader) != "" {
			return nil, fmt.Errorf("%s", strings.TrimSpace(string(body)))
		}
		return nil, fmt.Errorf("reading %s from %s: %s: %s (is the manager's --topology-endpoint on?)", what, url, resp.Status, strings.TrimSpace(string(body)))
	default:
		return nil, fmt.Errorf("reading %s from %s: %s: %s", what, url, resp.Status, strings.TrimSpace(string(body)))
	}
}

func (o URLOptions) httpClient() (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.InsecureSkipTLSVerify} //nolint:gosec // asked for
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the certificate authority: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no PEM certificate in %s", o.CAFile)
		}
		tlsConfig.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	return &http.Client{Timeout: time.Minute, Transport: transport}, nil
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
