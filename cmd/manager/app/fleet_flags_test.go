package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
)

func TestFleetFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(g Gomega, o Options)
		wantErr string
	}{
		{
			name: "not a hub unless told; the inventory in fleet-system, a heartbeat every 5s",
			check: func(g Gomega, o Options) {
				g.Expect(o.Fleet.Hub).To(BeFalse())
				g.Expect(o.Fleet.InventoryNamespace).To(Equal("fleet-system"))
				g.Expect(o.Fleet.Heartbeat).To(Equal(5 * time.Second))
				g.Expect(o.Fleet.AccessConfig).To(BeEmpty())
			},
		},
		{
			name: "a hub",
			args: []string{"--fleet-hub", "--fleet-access-config=/etc/fleet/providers.json", "--fleet-inventory-namespace=inventory", "--fleet-heartbeat=10s"},
			check: func(g Gomega, o Options) {
				g.Expect(o.Fleet).To(Equal(FleetOptions{Hub: true, AccessConfig: "/etc/fleet/providers.json", InventoryNamespace: "inventory", Heartbeat: 10 * time.Second}))
			},
		},
		{
			name:    "a hub needs its access providers",
			args:    []string{"--fleet-hub"},
			wantErr: "--fleet-hub needs --fleet-access-config",
		},
		{
			name: "the fleet flags are read only by a hub",
			args: []string{"--fleet-heartbeat=0", "--fleet-inventory-namespace=Not_A_Namespace"},
		},
		{
			name:    "the inventory namespace is a namespace name",
			args:    []string{"--fleet-hub", "--fleet-access-config=p.json", "--fleet-inventory-namespace=Fleet_System"},
			wantErr: `--fleet-inventory-namespace: "Fleet_System" is not a namespace name`,
		},
		{
			name:    "the heartbeat is positive",
			args:    []string{"--fleet-hub", "--fleet-access-config=p.json", "--fleet-heartbeat=0s"},
			wantErr: "--fleet-heartbeat must be positive, not 0s",
		},
		{
			name:    "a hub watches every namespace",
			args:    []string{"--fleet-hub", "--fleet-access-config=p.json", "--namespaces=team-a"},
			wantErr: "--namespaces does not go with --fleet-hub",
		},
		{
			name: "a hub's Lease is its own unless told",
			args: []string{"--fleet-hub", "--fleet-access-config=p.json", "--leader-elect"},
			check: func(g Gomega, o Options) {
				g.Expect(o.hubLeaderElectionID()).To(Equal(FleetHubLeaderElectionID))
			},
		},
		{
			name: "a hub's Lease as told",
			args: []string{"--fleet-hub", "--fleet-access-config=p.json", "--leader-elect", "--leader-election-id=hub-a"},
			check: func(g Gomega, o Options) {
				g.Expect(o.hubLeaderElectionID()).To(Equal("hub-a"))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o, err := parse(tt.args...)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			if tt.check != nil {
				tt.check(g, o)
			}
		})
	}
}

func TestLoadAccess(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.json", `{"providers": [{"name": "secretreader", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1",
		"command": "/plugins/secretreader", "provideClusterInfo": true}}]}`)
	tests := []struct {
		name, path, wantErr string
	}{
		{"missing", filepath.Join(dir, "nothing.json"), "--fleet-access-config " + filepath.Join(dir, "nothing.json") + ": failed to read access config file"},
		{"not JSON", write("bad.json", "providers: [a"), "failed to unmarshal access providers"},
		{"no provider", write("empty.json", `{"providers": []}`), "names no access provider: the hub could reach no member"},
		{"a provider without a command", write("nocommand.json", `{"providers": [{"name": "secretreader", "execConfig": {}}]}`),
			"provider 0 needs a name and an execConfig with a command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadAccess(tt.path)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
	t.Run("good", func(t *testing.T) {
		g := NewWithT(t)
		cfg, err := loadAccess(good)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.Providers).To(HaveLen(1))
		g.Expect(cfg.Providers[0].ExecConfig.Command).To(Equal("/plugins/secretreader"))
	})
}

// discoveryServer is an API server that answers discovery only, with the
// inventory's and the fleet's kinds: what building a hub asks (its cache
// maps the kinds it confines to the inventory namespace).
func discoveryServer(t *testing.T) *rest.Config {
	groups := map[string]metav1.APIResource{
		cpv1alpha1.GroupVersion.String():    {Name: "clusterprofiles", SingularName: "clusterprofile", Namespaced: true, Kind: "ClusterProfile"},
		fleetv1alpha1.GroupVersion.String(): {Name: "fleetgrants", SingularName: "fleetgrant", Namespaced: true, Kind: "FleetGrant"},
	}
	list := metav1.APIGroupList{}
	for gv := range groups {
		group, version, _ := strings.Cut(gv, "/")
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: version}
		list.Groups = append(list.Groups, metav1.APIGroup{Name: group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body any
		switch path := strings.TrimPrefix(r.URL.Path, "/apis/"); {
		case r.URL.Path == "/api":
			body = metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}}
		case r.URL.Path == "/api/v1":
			body = metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList"}, GroupVersion: "v1"}
		case r.URL.Path == "/apis":
			body = list
		case groups[path].Name != "":
			body = metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList"}, GroupVersion: path,
				APIResources: []metav1.APIResource{groups[path]}}
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// TestNewHub: a hub binds its probes when it is built; it refuses an
// access providers file it cannot read before it binds anything.
func TestNewHub(t *testing.T) {
	g := NewWithT(t)
	cfg := discoveryServer(t)
	o := DefaultOptions()
	o.HealthProbeBindAddress = "127.0.0.1:0"
	o.MetricsBindAddress = "0"
	o.Fleet.Hub = true
	o.Fleet.AccessConfig = filepath.Join(t.TempDir(), "providers.json")

	_, err := NewHub(cfg, o)
	g.Expect(err).To(MatchError(ContainSubstring("--fleet-access-config " + o.Fleet.AccessConfig + ": failed to read access config file")))

	g.Expect(os.WriteFile(o.Fleet.AccessConfig, []byte(`{"providers": [{"name": "secretreader", "execConfig": {"command": "secretreader"}}]}`), 0o600)).To(Succeed())
	hub, err := NewHub(cfg, o)
	g.Expect(err).NotTo(HaveOccurred())
	defer hub.close()
	g.Expect(hub.Fleet).NotTo(BeNil())
	g.Expect(hub.Addresses().Health).To(HavePrefix("127.0.0.1:"))
	g.Expect(hub.Addresses().Metrics).To(BeEmpty())

	o.Fleet.Hub = false
	_, err = NewHub(cfg, o)
	g.Expect(err).To(MatchError(ContainSubstring("set Options.Fleet.Hub")))
}
