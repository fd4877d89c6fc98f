package blast

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/topology"
)

func TestSourceSummary(t *testing.T) {
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	api := topology.WorkloadKey(topology.KindDeployment, "shop", "api")
	reach := Source{Namespaces: []string{"shop"}, Workloads: []topology.Key{web, api}, Compared: true}
	const prefix = "flagplane: this source reaches 1 namespace, 2 workloads and 0 Flagds; "
	tests := []struct {
		name              string
		changed, restarts []topology.Key
		want              string
	}{
		{"none", nil, nil, "no workload's sidecar changes"},
		{"one, no restart", []topology.Key{web}, nil, "1 workload gets a different sidecar (its new pods), it does not restart now (rolloutOnChange)"},
		{"one, restarted", []topology.Key{web}, []topology.Key{web}, "1 workload gets a different sidecar (its new pods), it restarts now (rolloutOnChange)"},
		{"two", []topology.Key{web, api}, []topology.Key{api}, "2 workloads get a different sidecar (their new pods), 1 of them restart now (rolloutOnChange)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := reach
			s.Changed, s.Restarts = tt.changed, tt.restarts
			NewWithT(t).Expect(s.Summary()).To(Equal(prefix + tt.want))
		})
	}
}
