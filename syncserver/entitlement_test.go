package syncserver

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/topology"
)

func TestEntitled(t *testing.T) {
	checkout := topology.FlagSetKey("shop", "checkout")
	for _, tc := range []struct {
		name      string
		setup     func(w *world)
		namespace string
		want      bool
	}{
		{name: "own namespace", namespace: "shop", want: true},
		{name: "own namespace, flag set missing", setup: func(w *world) { w.deleteFlagSet(checkout) }, namespace: "shop", want: true},
		{name: "other namespace without reference", namespace: "team-a", want: false},
		{name: "other namespace, reference without grant", setup: func(w *world) {
			w.source("team-a", "flags", "shop/checkout")
		}, namespace: "team-a", want: false},
		{name: "other namespace, granted but not referenced", setup: func(w *world) {
			w.grant("shop", "to-team-a", []string{"team-a"}, nil)
		}, namespace: "team-a", want: false},
		{name: "other namespace, referenced and granted", setup: func(w *world) {
			w.source("team-a", "flags", "shop/checkout")
			w.grant("shop", "to-team-a", []string{"team-a"}, nil)
		}, namespace: "team-a", want: true},
		{name: "grant of another flag set", setup: func(w *world) {
			w.source("team-a", "flags", "shop/checkout")
			w.grant("shop", "to-team-a", []string{"team-a"}, []string{"pricing"})
		}, namespace: "team-a", want: false},
		{name: "grant for another namespace", setup: func(w *world) {
			w.source("team-a", "flags", "shop/checkout")
			w.grant("shop", "to-team-b", []string{"team-b"}, nil)
		}, namespace: "team-a", want: false},
		{name: "a third namespace does not profit", setup: func(w *world) {
			w.source("team-a", "flags", "shop/checkout")
			w.grant("shop", "to-team-a", []string{"team-a"}, nil)
		}, namespace: "team-b", want: false},
		{name: "referenced and granted, flag set missing", setup: func(w *world) {
			w.source("team-a", "flags", "shop/checkout")
			w.grant("shop", "to-team-a", []string{"team-a"}, nil)
			w.deleteFlagSet(checkout)
		}, namespace: "team-a", want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t)
			w.flagSet("shop", "checkout", "off")
			if tc.setup != nil {
				tc.setup(w)
			}
			g.Expect(Entitled(w.topo.Snapshot(), tc.namespace, checkout)).To(Equal(tc.want))
		})
	}
}
