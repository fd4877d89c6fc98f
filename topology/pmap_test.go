package topology

import (
	"maps"
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
)

// collidingKey lets a test choose the hash, to force shared prefixes and
// full 64-bit collisions.
type collidingKey struct {
	id int
	h  uint64
}

func (k collidingKey) hash() uint64 { return k.h }

func contents[K hashable, V any](m pmap[K, V]) map[K]V {
	out := map[K]V{}
	for k, v := range m.all() {
		out[k] = v
	}
	return out
}

// TestPMapAgainstGoMap applies random operations to a pmap and a Go map, and
// checks after each that they hold the same, and that every earlier version
// of the pmap still holds what it held: edits copy what they share.
func TestPMapAgainstGoMap(t *testing.T) {
	hashes := map[string]func(r *rand.Rand, id int) uint64{
		"random":          func(r *rand.Rand, _ int) uint64 { return r.Uint64() },
		"full collisions": func(_ *rand.Rand, id int) uint64 { return uint64(id % 7) },
		"deep prefixes":   func(_ *rand.Rand, id int) uint64 { return uint64(id%3) << 60 },
	}
	for name, hashOf := range hashes {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := rand.New(rand.NewPCG(1, 2))
			keyHash := map[int]uint64{}
			key := func(id int) collidingKey {
				if _, ok := keyHash[id]; !ok {
					keyHash[id] = hashOf(r, id)
				}
				return collidingKey{id: id, h: keyHash[id]}
			}
			var m pmap[collidingKey, int]
			want := map[collidingKey]int{}
			type version struct {
				m    pmap[collidingKey, int]
				want map[collidingKey]int
			}
			var versions []version
			owner := newToken()
			for i := range 4000 {
				if i%50 == 0 {
					// Share the current version, as a Snapshot does.
					versions = append(versions, version{m: m, want: maps.Clone(want)})
					owner = newToken()
				}
				k := key(r.IntN(300))
				switch r.IntN(3) {
				case 0, 1:
					m.set(owner, k, i)
					want[k] = i
				default:
					_, had := want[k]
					g.Expect(m.del(owner, k)).To(Equal(had))
					delete(want, k)
				}
				g.Expect(m.len()).To(Equal(len(want)))
				v, ok := m.get(k)
				wv, wok := want[k]
				g.Expect(ok).To(Equal(wok))
				g.Expect(v).To(Equal(wv))
			}
			g.Expect(contents(m)).To(Equal(want))
			for _, v := range versions {
				g.Expect(contents(v.m)).To(Equal(v.want))
				g.Expect(v.m.len()).To(Equal(len(v.want)))
				for k, val := range v.want {
					got, ok := v.m.get(k)
					g.Expect(ok).To(BeTrue())
					g.Expect(got).To(Equal(val))
				}
			}
			// Deleting everything leaves the empty map.
			for k := range want {
				m.del(owner, k)
			}
			g.Expect(m).To(Equal(pmap[collidingKey, int]{}))
		})
	}
}

// TestPMapOwnership checks that an edit writes in place what it owns and
// copies what it does not.
func TestPMapOwnership(t *testing.T) {
	g := NewWithT(t)
	var m pmap[collidingKey, int]
	o1 := newToken()
	for i := range 100 {
		m.set(o1, collidingKey{id: i, h: uint64(i) * 0x9E3779B97F4A7C15}, i)
	}
	root := m.root
	m.set(o1, collidingKey{id: 1, h: 0x9E3779B97F4A7C15}, -1)
	g.Expect(m.root).To(BeIdenticalTo(root), "the owning edit writes in place")

	shared := m
	o2 := newToken()
	m.set(o2, collidingKey{id: 1, h: 0x9E3779B97F4A7C15}, -2)
	g.Expect(m.root).NotTo(BeIdenticalTo(root), "another edit copies")
	v, _ := shared.get(collidingKey{id: 1, h: 0x9E3779B97F4A7C15})
	g.Expect(v).To(Equal(-1))
}
