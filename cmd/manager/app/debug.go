package app

import (
	"errors"
	"net/http"
	"strconv"
)

var errTopologyNotBuilt = errors.New("topology not built from the caches yet")

// topologyHandler serves a snapshot of the topology as Graphviz DOT. Before
// the graph is built from the caches it serves the partial graph, and says
// so in the Flagplane-Topology-Built header, since a stuck start-up is when
// the picture helps most.
func topologyHandler(m *Manager) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		dot := m.Controller.Topology().Snapshot().DOT()
		w.Header().Set("Content-Type", "text/vnd.graphviz; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(dot)))
		w.Header().Set("Flagplane-Topology-Built", strconv.FormatBool(m.Controller.GraphBuilt()))
		if r.Method == http.MethodGet {
			_, _ = w.Write(dot)
		}
	})
}
