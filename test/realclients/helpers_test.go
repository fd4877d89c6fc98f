package realclients

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/freeport"
	"github.com/flagplane/flagplane/topology"
)

func newNamespace(ctx context.Context) string {
	ns, err := cp.NewNamespace(ctx, "rc")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

// checkoutFlags is a FeatureFlag with a boolean flag "new-checkout" (default
// variant given) and a string flag "color" whose targeting picks "red" for
// gold-tier users.
func checkoutFlags(ns, name, defaultVariant string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"new-checkout": {State: v1beta1.FlagStateEnabled, Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: defaultVariant},
		"color": {State: v1beta1.FlagStateEnabled, Variants: json.RawMessage(`{"red":"red","blue":"blue"}`), DefaultVariant: "blue",
			Targeting: json.RawMessage(`{"if":[{"==":[{"var":"tier"},"gold"]},"red",null]}`)},
	}
	return ff
}

// setDefault edits the default variant of new-checkout in the cluster.
func setDefault(ctx context.Context, ff *v1beta1.FeatureFlag, variant string) {
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
			return err
		}
		f := ff.Spec.FlagSpec.Flags["new-checkout"]
		f.DefaultVariant = variant
		ff.Spec.FlagSpec.Flags["new-checkout"] = f
		return k8s.Update(ctx, ff)
	}).Should(Succeed())
}

func deployment(ns, name string) *appsv1.Deployment { return fixtures.Deployment(ns, name, nil, nil) }

// webSource is the source of the scenarios: flag set "checkout" through the
// given provider, for Deployment "web".
func webSource(ns string, provider v1beta1.SyncProviderType) *v1beta1.FeatureFlagSource {
	return fixtures.Source(ns, "web-flags", []v1beta1.Source{{Source: "checkout", Provider: provider}},
		fixtures.Targeting("Deployment", "web"))
}

func create(ctx context.Context, objs ...client.Object) {
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed(), "creating %T %s", o, o.GetName())
	}
}

// serviceAccountToken is what a pod's projected token volume holds: a token
// of its service account for audience "flagplane", written to a file.
func serviceAccountToken(ctx context.Context, ns, serviceAccount string) string {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: serviceAccount}}
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences:         []string{syncserver.DefaultAudience},
		ExpirationSeconds: ptr.To[int64](600),
	}}
	Expect(k8s.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	path := filepath.Join(GinkgoT().TempDir(), "token")
	Expect(os.WriteFile(path, []byte(tr.Status.Token), 0o600)).To(Succeed())
	return path
}

// evaluation is a flag evaluation as flagd's HTTP API and the SDK report it.
type evaluation struct {
	Value   any    `json:"value"`
	Variant string `json:"variant"`
	Reason  string `json:"reason"`
	// Code is the error code, when evaluation failed: flagd's HTTP API
	// answers Connect codes ("not_found"), the SDK OpenFeature ones
	// ("FLAG_NOT_FOUND").
	Code string `json:"code,omitempty"`
}

func (e evaluation) String() string {
	return fmt.Sprintf("%v/%s/%s%s", e.Value, e.Variant, e.Reason, e.Code)
}

// flagd is a running flagd daemon.
type flagd struct {
	*process
	port     int // evaluation
	syncPort int // flagd's own sync service
}

// startFlagd starts flagd with the given source arguments on free loopback
// ports and waits until it answers.
func startFlagd(args ...string) *flagd {
	for attempt := 1; ; attempt++ {
		ports, err := freeport.Ports(4)
		Expect(err).NotTo(HaveOccurred())
		all := append([]string{"start",
			"--port", strconv.Itoa(ports[0]), "--management-port", strconv.Itoa(ports[1]),
			"--sync-port", strconv.Itoa(ports[2]), "--ofrep-port", strconv.Itoa(ports[3]),
		}, args...)
		f := &flagd{process: startProcess(binary("flagd"), all...), port: ports[0], syncPort: ports[2]}
		healthy := func() bool {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[1]))
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
		Eventually(func() bool { return healthy() || !f.running() }, 20*time.Second).Should(BeTrue())
		if f.running() {
			return f
		}
		// Another process took a port between our probe and flagd's bind.
		Expect(attempt).To(BeNumerically("<", 3), "flagd did not start:\n%s", f.output())
	}
}

// resolve evaluates a flag over flagd's HTTP (Connect) API.
func (f *flagd) resolve(kind, flagKey string, evalCtx map[string]any) func() (evaluation, error) {
	return f.resolveWithHeaders(kind, flagKey, evalCtx, nil)
}

// resolveWithHeaders is resolve with HTTP headers on the request.
func (f *flagd) resolveWithHeaders(kind, flagKey string, evalCtx map[string]any, headers map[string]string) func() (evaluation, error) {
	return func() (evaluation, error) {
		if evalCtx == nil {
			evalCtx = map[string]any{}
		}
		body, _ := json.Marshal(map[string]any{"flagKey": flagKey, "context": evalCtx})
		url := fmt.Sprintf("http://127.0.0.1:%d/flagd.evaluation.v1.Service/Resolve%s", f.port, kind)
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return evaluation{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		for name, v := range headers {
			req.Header.Set(name, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return evaluation{}, err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var e evaluation
		if resp.StatusCode != http.StatusOK {
			var failure struct{ Code, Message string }
			_ = json.Unmarshal(data, &failure)
			return evaluation{Code: failure.Code}, nil
		}
		if err := json.Unmarshal(data, &e); err != nil {
			return evaluation{}, fmt.Errorf("decoding %s: %w", data, err)
		}
		return e, nil
	}
}

// metadataOf evaluates a flag over flagd's HTTP (Connect) API and returns
// the metadata of its answer: flagd merges the flag set's metadata into
// each of its flags'.
func (f *flagd) metadataOf(kind, flagKey string) func() (map[string]any, error) {
	return func() (map[string]any, error) {
		body, _ := json.Marshal(map[string]any{"flagKey": flagKey, "context": map[string]any{}})
		url := fmt.Sprintf("http://127.0.0.1:%d/flagd.evaluation.v1.Service/Resolve%s", f.port, kind)
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("flagd answered %d: %s", resp.StatusCode, data)
		}
		var answer struct {
			Metadata map[string]any `json:"metadata"`
		}
		if err := json.Unmarshal(data, &answer); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", data, err)
		}
		return answer.Metadata, nil
	}
}

func key(ff *v1beta1.FeatureFlag) topology.Key { return topology.FlagSetKey(ff.Namespace, ff.Name) }

func splitHostPort(addr string) (string, int32) {
	host, port, err := net.SplitHostPort(addr)
	Expect(err).NotTo(HaveOccurred())
	p, err := strconv.Atoi(port)
	Expect(err).NotTo(HaveOccurred())
	return host, int32(p)
}

// syncRefusals reads flagplane_sync_refusals_total for a gRPC code from the
// registry the operator's metrics endpoint serves.
func syncRefusals(code string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "flagplane_sync_refusals_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
