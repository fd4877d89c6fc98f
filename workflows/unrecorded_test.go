package workflows

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/topology"
)

// TestUnrecordedRevisions: a problem set, changed and cleared is told to
// the listeners once each time; the same problem again is no change; the
// flag sets of a namespace with one are listed; a nil one remembers
// nothing.
func TestUnrecordedRevisions(t *testing.T) {
	g := NewWithT(t)
	var u UnrecordedRevisions
	var heard []topology.Key
	u.OnChange(func(k topology.Key) { heard = append(heard, k) })
	a, b, other := topology.FlagSetKey("shop", "a"), topology.FlagSetKey("shop", "b"), topology.FlagSetKey("bar", "a")
	quota := Unrecorded{Reason: "RevisionRefused", Message: "exceeded quota"}

	g.Expect(u.Set(a, quota)).To(BeTrue())
	g.Expect(u.Set(a, quota)).To(BeFalse(), "the same problem again")
	g.Expect(u.Set(a, Unrecorded{Reason: "NamespaceRevisionLimit", Message: "full"})).To(BeTrue())
	g.Expect(u.Set(b, quota)).To(BeTrue())
	g.Expect(u.Set(other, quota)).To(BeTrue())
	g.Expect(u.InNamespace("shop")).To(Equal([]topology.Key{a, b}))
	why, ok := u.Of(a)
	g.Expect(ok).To(BeTrue())
	g.Expect(why.Reason).To(Equal("NamespaceRevisionLimit"))

	g.Expect(u.Clear(a)).To(BeTrue())
	g.Expect(u.Clear(a)).To(BeFalse())
	_, ok = u.Of(a)
	g.Expect(ok).To(BeFalse())
	g.Expect(heard).To(Equal([]topology.Key{a, a, b, other, a}))

	var none *UnrecordedRevisions
	none.OnChange(func(topology.Key) { t.Fatal("a nil one has no listeners") })
	g.Expect(none.Set(a, quota)).To(BeTrue())
	_, ok = none.Of(a)
	g.Expect(ok).To(BeFalse())
	g.Expect(none.Clear(a)).To(BeFalse())
	g.Expect(none.InNamespace("shop")).To(BeEmpty())
}
