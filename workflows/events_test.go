package workflows

import (
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

// TestEventNotesFit: a note past the API server's 1024 bytes is cut, at a
// character, rather than refused with its Event.
func TestEventNotesFit(t *testing.T) {
	g := NewWithT(t)
	rec := events.NewFakeRecorder(4)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flagd.shop.flags"}}
	long := strings.Repeat("n", 63) + "/" + strings.Repeat("ä", 600)
	Warn(rec, cm, EventApplyFailed, ActionApply, "writing %s: %v", long, "refused")
	Normal(rec, cm, EventRestarted, ActionRollout, "100%% of %s", "web")
	for _, want := range []string{"Warning ApplyFailed writing " + strings.Repeat("n", 63), "Normal Restarted 100% of web"} {
		got := <-rec.Events
		g.Expect(got).To(HavePrefix(want))
		note := strings.SplitN(got, " ", 3)[2]
		g.Expect(len(note)).To(BeNumerically("<=", NoteMaxLength))
		g.Expect(utf8.ValidString(note)).To(BeTrue())
	}
}
