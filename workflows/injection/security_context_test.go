package injection_test

import (
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// TestSecurityContextOverride: a source relaxes the sidecar's securityContext
// only when the operator allows it, and only in its own namespace.
func TestSecurityContextOverride(t *testing.T) {
	const privileged = `{"privileged": true, "allowPrivilegeEscalation": true, "runAsNonRoot": false, "runAsUser": 0}`
	topo := topology.New()
	for _, manifest := range []string{
		`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","metadata":{"namespace":"team","name":"flags"},"spec":{"flagSpec":{"flags":{}}}}`,
		`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlagSource","metadata":{"namespace":"team","name":"src","annotations":{"` +
			injection.AnnotationSidecarSecurityContext + `":` + strconv.Quote(privileged) + `}},"spec":{"sources":[{"source":"flags"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":"own"}]}}`,
		`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"ReferenceGrant","metadata":{"namespace":"team","name":"g"},"spec":{"from":[{"group":"","kind":"Pod","namespace":"other"}],"to":[{"group":"core.openfeature.dev","kind":"FeatureFlagSource"}]}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"team","name":"own"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app"}]}}}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"other","name":"granted"},"spec":{"template":{"metadata":{"annotations":{"openfeature.dev/enabled":"true","openfeature.dev/featureflagsource":"team/src"}},"spec":{"containers":[{"name":"app","image":"app"}]}}}}`,
	} {
		if err := manifests.Load(topo, strings.NewReader(manifest)); err != nil {
			t.Fatal(err)
		}
	}
	v := topo.Snapshot()
	own, granted := topology.WorkloadKey(topology.KindDeployment, "team", "own"), topology.WorkloadKey(topology.KindDeployment, "other", "granted")
	for _, tc := range []struct {
		name       string
		allow      bool
		workload   topology.Key
		privileged bool
		warning    string
	}{
		{"off by default", false, own, false, "the operator does not allow"},
		{"allowed, own namespace", true, own, true, ""},
		{"allowed, workload of another namespace", true, granted, false, "only for workloads of its own namespace"},
		{"off, workload of another namespace", false, granted, false, "the operator does not allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := injection.DefaultOptions()
			o.AllowSecurityContextOverride = tc.allow
			inj := injection.Desired(v, tc.workload, o)
			g.Expect(inj.Sidecar).NotTo(BeNil())
			g.Expect(*inj.Sidecar.SecurityContext.Privileged).To(Equal(tc.privileged))
			if tc.warning == "" {
				g.Expect(inj.Warnings).To(BeEmpty())
			} else {
				g.Expect(inj.Warnings).To(ContainElement(ContainSubstring(tc.warning)))
				g.Expect(inj.Sidecar.SecurityContext).To(Equal(injection.HardenedSecurityContext()))
			}
		})
	}
}
