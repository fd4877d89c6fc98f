package topodump

import (
	"bytes"
	"context"
	"encoding/pem"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// edge is how the DOT of an edge starts.
func edge(from, to string) string { return `"` + from + `" -> "` + to + `" [` }

func TestFromDir(t *testing.T) {
	g := NewWithT(t)
	dot, err := FromDir("testdata/manifests", "default")
	g.Expect(err).NotTo(HaveOccurred())
	s := string(dot)
	g.Expect(s).To(HavePrefix("digraph topology {"))
	for _, e := range []string{
		// the selector targets both tier=web workloads, in its own namespace
		edge("featureflagsource:default/web", "deployment:default/storefront"),
		edge("featureflagsource:default/web", "statefulset:default/sessions"),
		// a same-namespace ref and a cross-namespace one permitted by the grant
		edge("featureflagsource:default/web", "featureflag:default/checkout"),
		edge("featureflagsource:default/web", "featureflag:platform/shared"),
		// the file provider's ConfigMap, mounted by the targets
		edge("featureflag:default/checkout", "configmap:default/default/checkout"),
		edge("configmap:default/default/checkout", "deployment:default/storefront"),
	} {
		g.Expect(s).To(ContainSubstring(e))
	}
	g.Expect(s).To(ContainSubstring(`"deployment:default/batch" [`), "an untargeted workload is a node")
	g.Expect(s).NotTo(ContainSubstring(`-> "deployment:default/batch"`), "tier=batch is not selected")
	g.Expect(s).NotTo(ContainSubstring("must-not-appear"), "hidden folders are skipped")
	g.Expect(s).NotTo(ContainSubstring("service:"), "kinds flagplane does not read are skipped")

	again, err := FromDir("testdata/manifests", "default")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(dot), "same files, same bytes")
}

func TestFromDirDefaultNamespace(t *testing.T) {
	g := NewWithT(t)
	dot, err := FromDir("../../config/samples", "shop")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(dot)).To(ContainSubstring(edge("featureflagsource:shop/shop", "deployment:shop/shop-web")))
	g.Expect(string(dot)).To(ContainSubstring(edge("configmap:shop/shop/shop-flags", "deployment:shop/shop-web")))
}

func TestFromDirErrors(t *testing.T) {
	g := NewWithT(t)
	_, err := FromDir(t.TempDir(), "default")
	g.Expect(err).To(MatchError(ContainSubstring("no *.yaml, *.yml or *.json files under")))
	_, err = FromDir("testdata/does-not-exist", "default")
	g.Expect(err).To(MatchError(ContainSubstring("reading testdata/does-not-exist")))
}

func TestFromURL(t *testing.T) {
	const dot = "digraph topology {\n}\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case TopologyPath:
			_, _ = w.Write([]byte(dot))
		case "/html" + TopologyPath:
			_, _ = w.Write([]byte("<html>login</html>"))
		default:
			http.Error(w, "no such page", http.StatusNotFound)
		}
	}))
	defer srv.Close()

	tests := []struct {
		name, url, wantErr string
	}{
		{name: "address", url: srv.URL},
		{name: "address with slash", url: srv.URL + "/"},
		{name: "full endpoint", url: srv.URL + TopologyPath},
		{name: "not found", url: srv.URL + "/nothing/", wantErr: "404 Not Found: no such page"},
		{name: "not DOT", url: srv.URL + "/html", wantErr: "did not answer with a Graphviz digraph"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := FromURL(context.Background(), tt.url, URLOptions{})
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(got)).To(Equal(dot))
		})
	}
}

// A manager with secure metrics: HTTPS with a self-signed certificate, 401
// without a bearer token, 403 for a token that may not get the path.
func TestFromURLSecure(t *testing.T) {
	const dot = "digraph topology {\n}\n"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "":
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		case "Bearer reader":
			_, _ = w.Write([]byte(dot))
		default:
			http.Error(w, "Authorization denied for user system:serviceaccount:x:nobody", http.StatusForbidden)
		}
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "https://")

	tests := []struct {
		name, url string
		opts      URLOptions
		wantErr   string
	}{
		{name: "token, certificate authority", url: srv.URL, opts: URLOptions{Token: "reader", CAFile: ca}},
		{name: "host:port is https", url: host, opts: URLOptions{Token: "reader", InsecureSkipTLSVerify: true}},
		{name: "unknown certificate", url: srv.URL, opts: URLOptions{Token: "reader"},
			wantErr: "--insecure-skip-tls-verify, or --certificate-authority"},
		{name: "no token", url: srv.URL, opts: URLOptions{InsecureSkipTLSVerify: true},
			wantErr: "401 Unauthorized: the manager answers only to a bearer token the API server authenticates"},
		{name: "a token without the permission", url: srv.URL, opts: URLOptions{Token: "nobody", InsecureSkipTLSVerify: true},
			wantErr: "403 Forbidden: Authorization denied for user system:serviceaccount:x:nobody: the token's identity may not get /debug/topology (bind it to the ClusterRole flagplane-metrics-reader)"},
		{name: "no token in clear text", url: "http://" + host, opts: URLOptions{Token: "reader"},
			wantErr: "not sending a token to http://" + host + "/debug/topology in clear text"},
		{name: "a CA file that is not PEM", url: srv.URL, opts: URLOptions{CAFile: "doc.go"}, wantErr: "no PEM certificate in doc.go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := FromURL(context.Background(), tt.url, tt.opts)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(got)).To(Equal(dot))
		})
	}
}

func TestRender(t *testing.T) {
	dot := []byte("digraph topology {\n  \"a\" -> \"b\";\n}\n")
	t.Run("dot is returned as is", func(t *testing.T) {
		g := NewWithT(t)
		out, err := Render(context.Background(), dot, "dot")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal(dot))
	})
	t.Run("unknown format", func(t *testing.T) {
		g := NewWithT(t)
		_, err := Render(context.Background(), dot, "pdf")
		g.Expect(err).To(MatchError(`unknown format "pdf": use one of dot, svg, png`))
	})
	t.Run("DOT the SVG renderer does not draw", func(t *testing.T) {
		g := NewWithT(t)
		_, err := Render(context.Background(), []byte("digraph {"), "svg")
		g.Expect(err).To(MatchError(ContainSubstring("drawing the topology as SVG: DOT line 1: the graph is not closed")))
	})
	t.Run("PNG without Graphviz", func(t *testing.T) {
		g := NewWithT(t)
		t.Setenv("PATH", "")
		_, err := Render(context.Background(), dot, "png")
		g.Expect(errors.Is(err, ErrGraphvizMissing)).To(BeTrue())
		g.Expect(err.Error()).To(ContainSubstring("use --format svg, which needs nothing"))
	})
	if _, err := exec.LookPath("dot"); err != nil {
		t.Log("Graphviz not installed: not rendering PNG")
		return
	}
	t.Run("png", func(t *testing.T) {
		g := NewWithT(t)
		out, err := Render(context.Background(), dot, "png")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out[:8]).To(Equal([]byte("\x89PNG\r\n\x1a\n")))
	})
	t.Run("Graphviz rejects the input", func(t *testing.T) {
		g := NewWithT(t)
		_, err := Render(context.Background(), []byte("digraph {"), "png")
		g.Expect(err).To(MatchError(ContainSubstring("-Tpng")))
	})
}

// dotNode is a node statement as topology.DOT writes it.
var dotNode = regexp.MustCompile(`(?m)^  "([^"]+)" \[label="([^"]*)"`)

// TestRenderSVGWithoutGraphviz draws the samples' topology with no `dot`
// to run: well-formed SVG with a size, every node's title and every line
// of its label.
func TestRenderSVGWithoutGraphviz(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("PATH", "")
	dot, err := FromDir("../../config/samples", "shop")
	g.Expect(err).NotTo(HaveOccurred())
	svg, err := Render(context.Background(), dot, "svg")
	g.Expect(err).NotTo(HaveOccurred())

	var root *xml.StartElement
	var titles, texts []string
	d := xml.NewDecoder(bytes.NewReader(svg))
	var open []string // the elements the decoder is in
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		g.Expect(err).NotTo(HaveOccurred(), "well-formed XML:\n%s", svg)
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == nil {
				root = &tok
			}
			open = append(open, tok.Name.Local)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			switch {
			case len(open) == 0:
			case open[len(open)-1] == "title":
				titles = append(titles, string(tok))
			case open[len(open)-1] == "text":
				texts = append(texts, string(tok))
			}
		}
	}
	g.Expect(open).To(BeEmpty())
	g.Expect(root).NotTo(BeNil())
	g.Expect(root.Name.Local).To(Equal("svg"))
	g.Expect(root.Name.Space).To(Equal("http://www.w3.org/2000/svg"))
	attrs := map[string]string{}
	for _, a := range root.Attr {
		attrs[a.Name.Local] = a.Value
	}
	g.Expect(attrs).To(HaveKeyWithValue("width", MatchRegexp(`^[0-9.]+pt$`)))
	g.Expect(attrs).To(HaveKeyWithValue("height", MatchRegexp(`^[0-9.]+pt$`)))
	g.Expect(attrs).To(HaveKeyWithValue("viewBox", MatchRegexp(`^0 0 [0-9.]+ [0-9.]+$`)))

	nodes := dotNode.FindAllSubmatch(dot, -1)
	statements := 0
	for _, line := range strings.Split(string(dot), "\n") {
		if strings.HasPrefix(line, `  "`) && !strings.Contains(line, `" -> "`) {
			statements++
		}
	}
	g.Expect(nodes).To(HaveLen(statements), "every node statement read")
	g.Expect(len(nodes)).To(BeNumerically(">=", 5), "the samples' flag sets, sources, ConfigMap and workloads")
	for _, n := range nodes {
		g.Expect(titles).To(ContainElement(string(n[1])))
		for _, line := range strings.Split(string(n[2]), `\n`) {
			g.Expect(texts).To(ContainElement(line), "a line of the label of %s", n[1])
		}
	}
	g.Expect(texts).To(ContainElement("shop/shop-flags"))
	g.Expect(texts).To(ContainElement("shop/shop-web"))
}
