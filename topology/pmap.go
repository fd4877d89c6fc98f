package topology

import (
	"iter"
	"math/bits"
	"slices"
)

// pmap is a persistent hash map: a CHAMP trie (compressed hash-array mapped
// prefix tree, Steindorfer and Vinju 2015) with 32-way branching.
//
// Why not a Go map: a View must stay consistent while writers go on, and
// with a Go map that would mean copying the whole map. A trie shares
// everything it does not touch, so a write copies only the O(log32 n) nodes
// on its path, and a snapshot is just the root pointer.
//
// Each trie node records the ownership token it was made under. A writer
// changes nodes of its own token in place and copies any other node it
// touches (transient updates, as in Clojure). The Topology takes a new token
// whenever a Snapshot shares the state, so no node a View can reach is ever
// written again: Views need no locks, and between Snapshots writers pay no
// copies.
//
// A pmap is a small value (root and size). Under one token, never mutate two
// copies of the same pmap value: they share the nodes the token owns.
type pmap[K hashable, V any] struct {
	root *hnode[K, V]
	size int
}

// pset is a persistent set.
type pset[K hashable] = pmap[K, struct{}]

// hashable is a map key that brings its own hash. maphash.Comparable would do
// this generically but makes every key escape to the heap.
type hashable interface {
	comparable
	hash() uint64
}

// token is an ownership token: trie and graph nodes made under it may be
// written in place by whoever holds it (see pmap).
type token uint64

type hnode[K hashable, V any] struct {
	owner token
	// datamap marks the 5-bit hash fragments stored inline in entries,
	// nodemap those stored in children; both are dense, ordered by fragment.
	datamap  uint32
	nodemap  uint32
	entries  []hentry[K, V]
	children []*hnode[K, V]
}

type hentry[K hashable, V any] struct {
	hash uint64
	key  K
	val  V
}

const (
	bitsPerLevel = 5
	// hashBits is where the hash runs out: a node at this depth is a
	// collision bucket whose entries all have the same hash.
	hashBits = 64
)

func fragment(h uint64, shift uint) uint32 { return 1 << ((h >> shift) & 31) }

func position(bitmap, bit uint32) int { return bits.OnesCount32(bitmap & (bit - 1)) }

func (m pmap[K, V]) len() int { return m.size }

func (m pmap[K, V]) get(k K) (V, bool) {
	h := k.hash()
	n := m.root
	for shift := uint(0); n != nil; shift += bitsPerLevel {
		if shift >= hashBits {
			for i := range n.entries {
				if n.entries[i].key == k {
					return n.entries[i].val, true
				}
			}
			break
		}
		bit := fragment(h, shift)
		if n.datamap&bit != 0 {
			if e := &n.entries[position(n.datamap, bit)]; e.hash == h && e.key == k {
				return e.val, true
			}
			break
		}
		if n.nodemap&bit == 0 {
			break
		}
		n = n.children[position(n.nodemap, bit)]
	}
	var zero V
	return zero, false
}

func (m pmap[K, V]) has(k K) bool {
	_, ok := m.get(k)
	return ok
}

// set inserts or replaces the value of k.
func (m *pmap[K, V]) set(owner token, k K, v V) {
	if m.root == nil {
		m.root = &hnode[K, V]{owner: owner}
	}
	var added bool
	m.root, added = m.root.set(owner, 0, k.hash(), k, v)
	if added {
		m.size++
	}
}

// del removes k and tells whether it was there.
func (m *pmap[K, V]) del(owner token, k K) bool {
	if m.root == nil {
		return false
	}
	root, removed := m.root.del(owner, 0, k.hash(), k)
	if !removed {
		return false
	}
	m.size--
	if m.size == 0 {
		root = nil
	}
	m.root = root
	return true
}

// all iterates in trie order, which depends on the process's hash seed:
// callers that need an order sort.
func (m pmap[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m.root != nil {
			m.root.each(yield)
		}
	}
}

// keys collects the keys, so that callers can mutate the map while they go
// through them.
func (m pmap[K, V]) keys() []K {
	if m.size == 0 {
		return nil
	}
	out := make([]K, 0, m.size)
	for k := range m.all() {
		out = append(out, k)
	}
	return out
}

func (n *hnode[K, V]) each(yield func(K, V) bool) bool {
	for i := range n.entries {
		if !yield(n.entries[i].key, n.entries[i].val) {
			return false
		}
	}
	for _, c := range n.children {
		if !c.each(yield) {
			return false
		}
	}
	return true
}

// editable returns n itself when owner owns it, else a copy owned by owner.
// Copies get fresh backing arrays, so appending to them never writes into an
// array that a published node still uses.
func (n *hnode[K, V]) editable(owner token) *hnode[K, V] {
	if n.owner == owner {
		return n
	}
	return &hnode[K, V]{
		owner:    owner,
		datamap:  n.datamap,
		nodemap:  n.nodemap,
		entries:  slices.Clone(n.entries),
		children: slices.Clone(n.children),
	}
}

func (n *hnode[K, V]) set(owner token, shift uint, h uint64, k K, v V) (*hnode[K, V], bool) {
	if shift >= hashBits {
		for i := range n.entries {
			if n.entries[i].key == k {
				n = n.editable(owner)
				n.entries[i].val = v
				return n, false
			}
		}
		n = n.editable(owner)
		n.entries = append(n.entries, hentry[K, V]{hash: h, key: k, val: v})
		return n, true
	}
	bit := fragment(h, shift)
	switch {
	case n.datamap&bit != 0:
		i := position(n.datamap, bit)
		e := n.entries[i]
		if e.hash == h && e.key == k {
			n = n.editable(owner)
			n.entries[i].val = v
			return n, false
		}
		sub := pairNode(owner, shift+bitsPerLevel, e, hentry[K, V]{hash: h, key: k, val: v})
		n = n.editable(owner)
		n.entries = slices.Delete(n.entries, i, i+1)
		n.datamap ^= bit
		n.nodemap |= bit
		n.children = slices.Insert(n.children, position(n.nodemap, bit), sub)
		return n, true
	case n.nodemap&bit != 0:
		i := position(n.nodemap, bit)
		child, added := n.children[i].set(owner, shift+bitsPerLevel, h, k, v)
		if child != n.children[i] {
			n = n.editable(owner)
			n.children[i] = child
		}
		return n, added
	default:
		n = n.editable(owner)
		n.datamap |= bit
		n.entries = slices.Insert(n.entries, position(n.datamap, bit), hentry[K, V]{hash: h, key: k, val: v})
		return n, true
	}
}

// pairNode makes the sub-trie holding two entries whose hashes agree on all
// fragments above shift.
func pairNode[K hashable, V any](owner token, shift uint, a, b hentry[K, V]) *hnode[K, V] {
	if shift >= hashBits {
		return &hnode[K, V]{owner: owner, entries: []hentry[K, V]{a, b}}
	}
	ba, bb := fragment(a.hash, shift), fragment(b.hash, shift)
	if ba == bb {
		return &hnode[K, V]{owner: owner, nodemap: ba, children: []*hnode[K, V]{pairNode(owner, shift+bitsPerLevel, a, b)}}
	}
	if bb < ba {
		a, b = b, a
	}
	return &hnode[K, V]{owner: owner, datamap: ba | bb, entries: []hentry[K, V]{a, b}}
}

func (n *hnode[K, V]) del(owner token, shift uint, h uint64, k K) (*hnode[K, V], bool) {
	if shift >= hashBits {
		for i := range n.entries {
			if n.entries[i].key == k {
				n = n.editable(owner)
				n.entries = slices.Delete(n.entries, i, i+1)
				return n, true
			}
		}
		return n, false
	}
	bit := fragment(h, shift)
	switch {
	case n.datamap&bit != 0:
		i := position(n.datamap, bit)
		if e := &n.entries[i]; e.hash != h || e.key != k {
			return n, false
		}
		n = n.editable(owner)
		n.entries = slices.Delete(n.entries, i, i+1)
		n.datamap ^= bit
		return n, true
	case n.nodemap&bit != 0:
		i := position(n.nodemap, bit)
		child, removed := n.children[i].del(owner, shift+bitsPerLevel, h, k)
		if !removed {
			return n, false
		}
		n = n.editable(owner)
		if len(child.children) == 0 && len(child.entries) == 1 {
			// Keep the trie canonical: a sub-trie of one entry is inlined,
			// so deletions shrink the trie back as insertions grew it.
			e := child.entries[0]
			n.children = slices.Delete(n.children, i, i+1)
			n.nodemap ^= bit
			n.datamap |= bit
			n.entries = slices.Insert(n.entries, position(n.datamap, bit), e)
		} else {
			n.children[i] = child
		}
		return n, true
	default:
		return n, false
	}
}
