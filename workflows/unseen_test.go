package workflows_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/workflows"
)

// TestUnseenWrites: a write is unseen until an event brings a version other
// than the one it replaced; a late event of the replaced version does not
// end it, and nil remembers nothing.
func TestUnseenWrites(t *testing.T) {
	g := NewWithT(t)
	cm := workflows.ObjectRef{Kind: "ConfigMap", Namespace: "shop", Name: "flagd.shop.flags"}
	other := workflows.ObjectRef{Kind: "ConfigMap", Namespace: "team", Name: "flagd.shop.flags"}
	var w workflows.UnseenWrites

	g.Expect(w.Unseen(cm)).To(BeFalse(), "nothing written")
	w.Wrote(cm, "41")
	g.Expect(w.Unseen(cm)).To(BeTrue())
	g.Expect(w.Unseen(other)).To(BeFalse(), "another object")
	w.Seen(cm, "41")
	g.Expect(w.Unseen(cm)).To(BeTrue(), "an event of the version the write replaced, delivered late")
	w.Seen(cm, "42")
	g.Expect(w.Unseen(cm)).To(BeFalse(), "the write's own event")

	w.Wrote(other, "")
	w.Seen(other, "7")
	g.Expect(w.Unseen(other)).To(BeFalse(), "a create, seen")

	var none *workflows.UnseenWrites
	none.Wrote(cm, "1")
	none.Seen(cm, "2")
	g.Expect(none.Unseen(cm)).To(BeFalse())
}
