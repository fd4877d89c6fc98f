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

	g.Expect(w.Unseen(cm, "41")).To(BeFalse(), "nothing written")
	w.Wrote(cm, "41")
	g.Expect(w.Unseen(cm, "41")).To(BeTrue(), "the cache holds the version the write replaced")
	g.Expect(w.Unseen(other, "")).To(BeFalse(), "another object")
	w.Seen(cm, "41")
	g.Expect(w.Unseen(cm, "41")).To(BeTrue(), "an event of the version the write replaced, delivered late")
	w.Seen(cm, "42")
	g.Expect(w.Unseen(cm, "41")).To(BeFalse(), "the write's own event")

	w.Wrote(other, "")
	g.Expect(w.Unseen(other, "")).To(BeTrue(), "a create, not in the cache yet")
	w.Seen(other, "7")
	g.Expect(w.Unseen(other, "")).To(BeFalse(), "a create, seen")

	// The write's event came before the write was recorded: the cache
	// holds a later version, and nothing is awaited.
	w.Wrote(cm, "50")
	g.Expect(w.Unseen(cm, "51")).To(BeFalse(), "the cache is past the write")
	g.Expect(w.Unseen(cm, "50")).To(BeFalse(), "and it is forgotten")

	var none *workflows.UnseenWrites
	none.Wrote(cm, "1")
	none.Seen(cm, "2")
	g.Expect(none.Unseen(cm, "1")).To(BeFalse())
}
