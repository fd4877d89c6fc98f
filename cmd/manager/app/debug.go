package app

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/go-logr/logr"

	"github.com/flagplane/flagplane/inspect/explain"
	"github.com/flagplane/flagplane/inspect/topodump"
)

// ExplainPath is where the manager explains an object (query parameters
// kind, namespace, name) as `flagplane explain` does, as JSON, with the
// sidecar computed with the options this manager injects with.
const ExplainPath = topodump.ExplainPath

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

// explainHandler serves `flagplane explain --url`: the explanation of one
// object from the manager's own graph, computed with its own injection
// options (its --sidecar-* flags, its sync server), which a CLI reading the
// API cannot know.
func explainHandler(m *Manager) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		kind, namespace, name := q.Get("kind"), q.Get("namespace"), q.Get("name")
		if kind == "" || namespace == "" || name == "" {
			http.Error(w, "give the query parameters kind, namespace and name", http.StatusBadRequest)
			return
		}
		if _, err := explain.LookupKind(kind); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !m.Controller.GraphBuilt() {
			http.Error(w, errTopologyNotBuilt.Error(), http.StatusServiceUnavailable)
			return
		}
		report, err := explain.Explain(m.Controller.Topology().Snapshot(), kind, namespace, name, m.injection)
		var notFound explain.ErrNotFound
		switch {
		case errors.As(err, &notFound):
			w.Header().Set(topodump.NotInGraphHeader, "true")
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if report.Sidecar != nil {
			report.Sidecar.Note = "computed by the manager with the options it injects with"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(report)
	})
}

// profilingHandlers are net/http/pprof's handlers under /debug/pprof/, for
// the metrics server (Options.Profiling): the index serves the named
// profiles (heap, allocs, goroutine, ...), the others what it does not.
func profilingHandlers() map[string]http.Handler {
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}

// releaseStartupMemory collects the start-up's garbage and returns the
// freed memory to the operating system at once (the runtime would do it
// over minutes), and logs what it released.
func releaseStartupMemory(logger logr.Logger) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	logger.Info("start-up memory returned to the system",
		"heapInUseBefore", before.HeapInuse, "heapInUseAfter", after.HeapInuse, "released", after.HeapReleased)
}
