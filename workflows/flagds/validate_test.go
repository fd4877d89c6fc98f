package flagds

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// TestValidateNames: a Flagd's name names its Deployment, Service, Ingress
// and HTTPRoute, and its service account goes into the pods and a
// RoleBinding: what they cannot carry is refused up front (Accepted
// False), never sent to the API server.
func TestValidateNames(t *testing.T) {
	for _, tc := range []struct {
		name, serviceAccount string
		field                string // "" when valid
	}{
		{name: "f"},
		{name: "f" + strings.Repeat("0", 62), serviceAccount: strings.Repeat("a.", 126) + "a"},
		{name: "f" + strings.Repeat("0", 63), field: "metadata.name"},
		{name: "0f", field: "metadata.name"},
		{name: "f.g", field: "metadata.name"},
		{name: "f", serviceAccount: "Web", field: "spec.serviceAccountName"},
		{name: "f", serviceAccount: strings.Repeat("a", 254), field: "spec.serviceAccountName"},
	} {
		t.Run(tc.name+" "+tc.serviceAccount, func(t *testing.T) {
			g := NewWithT(t)
			f := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: strings.Repeat("n", 63), Name: tc.name}}
			f.Spec.FeatureFlagSource = "src"
			f.Spec.ServiceAccountName = tc.serviceAccount
			errs := Validate(f)
			if tc.field == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).To(ConsistOf(HaveField("Field", tc.field)))
		})
	}
}
