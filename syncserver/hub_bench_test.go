package syncserver

import (
	"fmt"
	"testing"

	"github.com/flagplane/flagplane/topology"
)

// BenchmarkHubOffer is the hub's own part of an edit: one flag set's state
// offered to all its subscribers, each on a connection of its own, without
// gRPC. Every subscriber's wake-up is taken between rounds, as its stream
// goroutine would, so that each offer finds an empty slot, as in a fan-out.
// The baseline, floor, offers the same state to a plain slice of the same
// subscribers: what the hub adds to it is its bookkeeping.
//
//	go test ./syncserver -run '^$' -bench HubOffer
func BenchmarkHubOffer(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		w := newWorld(b)
		w.flagSet("shop", "checkout", "off")
		key := topology.FlagSetKey("shop", "checkout")
		h := newHub(w.topo)
		subs := make([]*subscriber, n)
		for i := range subs {
			subs[i] = h.join(key, "shop", fmt.Sprintf("10.0.%d.%d:4000", i/250, i%250))
		}
		h.round()
		v := w.topo.Snapshot()
		offerAll := map[string]func(){
			"hub": func() { h.publish(v, key, nil) },
			"floor": func() {
				u := subs[0].latest.Load()
				for _, s := range subs {
					s.offer(u)
				}
			},
		}
		for _, name := range []string{"floor", "hub"} {
			b.Run(fmt.Sprintf("subscribers=%d/%s", n, name), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					for _, s := range subs {
						select {
						case <-s.wake:
						default:
						}
					}
					b.StartTimer()
					offerAll[name]()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/subscriber")
			})
		}
	}
}
