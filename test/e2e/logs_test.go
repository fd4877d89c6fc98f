package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"

	"github.com/flagplane/flagplane/test/fixtures"
)

// jsonLogs keeps every line the manager logs, encoded as the manager's
// --zap-encoder=json writes it.
type jsonLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

var managerLogs = &jsonLogs{}

func (l *jsonLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *jsonLogs) Sync() error { return nil }

// tee adds to a logger's core one that writes JSON lines to l, at every
// level the logger writes.
func (l *jsonLogs) tee(core zapcore.Core) zapcore.Core {
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		TimeKey: "ts", LevelKey: "level", NameKey: "logger", MessageKey: "msg",
		EncodeTime: zapcore.ISO8601TimeEncoder, EncodeLevel: zapcore.LowercaseLevelEncoder, EncodeDuration: zapcore.StringDurationEncoder,
	})
	return zapcore.NewTee(core, zapcore.NewCore(enc, l, zapcore.LevelEnabler(core)))
}

func (l *jsonLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// documentedGrep is the grep -E pattern of docs/debugging.md's "Following
// one FeatureFlag edit through the logs", for FeatureFlag ns/name.
func documentedGrep(ns, name string) string {
	GinkgoHelper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "debugging.md"))
	Expect(err).NotTo(HaveOccurred())
	_, section, found := strings.Cut(string(doc), "## Following one FeatureFlag edit through the logs")
	Expect(found).To(BeTrue(), "docs/debugging.md has no section on following an edit through the logs")
	m := regexp.MustCompile(`grep -E '([^']+)'`).FindStringSubmatch(section)
	Expect(m).NotTo(BeNil(), "docs/debugging.md shows no grep -E of the logs")
	return strings.NewReplacer(`"name":"shop-flags"`, `"name":"`+name+`"`, `"namespace":"shop"`, `"namespace":"`+ns+`"`).Replace(m[1])
}

var _ = Describe("the logs of one FeatureFlag edit", func() {
	It("are found by the command docs/debugging.md gives: its ConfigMap written, its revision recorded, its status written", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := flagSet(ns, "checkout", "off")
		create(ctx, ff, source(ns, "flags", "web", fixtures.FileRef("checkout")), deployment(ns, "web", appImage, nil))
		addr := flagdAddr(readyPod(ctx, ns, "web"))
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))
		setVariant(ctx, ff, "on")
		Eventually(resolve(addr)).Should(Equal(evaluated("on")))

		pattern := documentedGrep(ns, "checkout")
		file := filepath.Join(GinkgoT().TempDir(), "manager.log")
		Eventually(func(g Gomega) {
			g.Expect(os.WriteFile(file, []byte(managerLogs.String()), 0o600)).To(Succeed())
			out, err := exec.CommandContext(ctx, "grep", "-E", pattern, file).Output()
			g.Expect(err).NotTo(HaveOccurred(), "grep -E %q found nothing", pattern)
			var messages []string
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var entry struct {
					Msg         string            `json:"msg"`
					FeatureFlag map[string]string `json:"FeatureFlag"`
				}
				g.Expect(json.Unmarshal([]byte(line), &entry)).To(Succeed(), "a JSON line: %s", line)
				g.Expect(entry.FeatureFlag).To(Equal(map[string]string{"namespace": ns, "name": "checkout"}), "the line names the FeatureFlag: %s", line)
				messages = append(messages, entry.Msg)
			}
			g.Expect(messages).To(ContainElements("applied ConfigMap", "revision recorded", "status written"))
		}).Should(Succeed())
	})
})
