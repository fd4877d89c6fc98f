package rbac

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/topology"
)

func TestRBACNameRoundTrip(t *testing.T) {
	g := NewWithT(t)
	for _, k := range []topology.Key{
		topology.WorkloadKey(topology.KindDeployment, "shop", "web"),
		topology.WorkloadKey(topology.KindStatefulSet, "db-ns", "db.primary"),
		topology.WorkloadKey(topology.KindDaemonSet, "kube-x", "agent"),
		topology.WorkloadKey(topology.OwnerKind("batch", "CronJob"), "jobs", "nightly"),
		topology.WorkloadKey(topology.OwnerKind("argoproj.io", "Rollout"), "shop", "web"),
	} {
		got, ok := WorkloadOfName(Name(k))
		g.Expect(ok).To(BeTrue(), k.String())
		g.Expect(got).To(Equal(k))
	}
	for _, name := range []string{"flagd.shop.web", "flagplane:featureflag-reader:pod:a:b", "flagplane:featureflag-reader:deployment:a"} {
		_, ok := WorkloadOfName(name)
		g.Expect(ok).To(BeFalse(), name)
	}
}
