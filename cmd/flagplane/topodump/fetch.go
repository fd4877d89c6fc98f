package topodump

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
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
	if !strings.Contains(url, "://") {
		url = "https://" + url
	}
	if !strings.HasSuffix(strings.TrimSuffix(url, "/"), TopologyPath) {
		url = strings.TrimSuffix(url, "/") + TopologyPath
	}
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
		return nil, fmt.Errorf("reading the topology from %s: %w%s", url, err, hint)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDOT))
	if err != nil {
		return nil, fmt.Errorf("reading the topology from %s: %w", url, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return checkDOT(body, url)
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("reading the topology from %s: %s: the manager answers only to a bearer token the API server authenticates (--token or --token-file)", url, resp.Status)
	case http.StatusForbidden:
		return nil, fmt.Errorf("reading the topology from %s: %s: %s: the token's identity may not get %s (bind it to the ClusterRole flagplane-metrics-reader)",
			url, resp.Status, strings.TrimSpace(string(body)), TopologyPath)
	default:
		return nil, fmt.Errorf("reading the topology from %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
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
