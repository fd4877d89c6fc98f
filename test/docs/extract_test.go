package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// command is one command a doc shows, with the output it shows, if any.
type command struct {
	// text is the command as written, a continued line (ending in \)
	// joined to the next with one space.
	text string
	// output are the lines a console block shows after the command.
	output []string
	// where is the doc and line, e.g. docs/cli.md:42.
	where string
}

// doc is what one Markdown file shows: its commands, the Make targets its
// inline code names, and the mistakes of form found on the way.
type doc struct {
	commands    []command
	makeTargets []string
	problems    []string
}

var (
	fenceOpen   = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([A-Za-z0-9_-]*)")
	inlineCode  = regexp.MustCompile("`([^`\n]+)`")
	makeInline  = regexp.MustCompile(`^make( [a-z0-9][a-z0-9-]*)+( [A-Z_]+=\S*)*$`)
	shellBlocks = []string{"sh", "shell", "bash"}
)

// extractFile reads a Markdown file; name is how failures name it.
func extractFile(path, name string) (doc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return doc{}, err
	}
	return extract(string(b), name), nil
}

// extract finds the commands of a Markdown text, by the convention of
// docs_test.go: the lines of sh, shell and bash blocks are commands; in
// console blocks, lines starting with "$ " are commands and the lines after
// them their output. Any other line starting with "$ " is a problem.
func extract(text, name string) doc {
	var d doc
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceOpen.FindStringSubmatch(lines[i])
		if m == nil {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), "$ ") {
				d.problems = append(d.problems, fmt.Sprintf("%s:%d: a prompt outside a console block", name, i+1))
			}
			d.makeTargets = append(d.makeTargets, inlineMakeTargets(lines[i])...)
			continue
		}
		indent, fence, lang := m[1], m[2], m[3]
		start := i + 1
		end := start
		for end < len(lines) && !isFenceClose(lines[end], fence) {
			end++
		}
		if end == len(lines) {
			d.problems = append(d.problems, fmt.Sprintf("%s:%d: a code block that is never closed", name, i+1))
		}
		body := make([]string, 0, end-start)
		for _, l := range lines[start:min(end, len(lines))] {
			body = append(body, strings.TrimPrefix(l, indent))
		}
		where := func(k int) string { return fmt.Sprintf("%s:%d", name, start+k+1) }
		switch {
		case slices.Contains(shellBlocks, lang):
			d.commands = append(d.commands, shellCommands(body, where)...)
		case lang == "console":
			cmds, problems := consoleCommands(body, where)
			d.commands = append(d.commands, cmds...)
			d.problems = append(d.problems, problems...)
		default:
			for k, l := range body {
				if strings.HasPrefix(l, "$ ") {
					d.problems = append(d.problems, fmt.Sprintf("%s: a prompt in a %q block: mark it console, or leave the prompt out", where(k), lang))
				}
			}
		}
		i = end
	}
	return d
}

func isFenceClose(line, fence string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == ""
}

// shellCommands: every line a command, comments and blank lines aside.
func shellCommands(body []string, where func(int) string) []command {
	var out []command
	for k := 0; k < len(body); k++ {
		t := strings.TrimSpace(body[k])
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		text, last := joinContinued(body, k)
		out = append(out, command{text: text, where: where(k)})
		k = last
	}
	return out
}

// consoleCommands: "$ " lines are commands, the lines after them output.
func consoleCommands(body []string, where func(int) string) ([]command, []string) {
	var out []command
	var problems []string
	for k := 0; k < len(body); k++ {
		l := body[k]
		if !strings.HasPrefix(l, "$ ") {
			if len(out) == 0 {
				if strings.TrimSpace(l) != "" {
					problems = append(problems, fmt.Sprintf("%s: output before the first command of a console block", where(k)))
				}
				continue
			}
			out[len(out)-1].output = append(out[len(out)-1].output, l)
			continue
		}
		body[k] = strings.TrimPrefix(l, "$ ")
		text, last := joinContinued(body, k)
		out = append(out, command{text: text, where: where(k)})
		k = last
	}
	return out, problems
}

// joinContinued joins lines ending in a backslash to the next, from k on,
// and says the index of the last line it took.
func joinContinued(body []string, k int) (string, int) {
	parts := []string{strings.TrimSpace(body[k])}
	for strings.HasSuffix(parts[len(parts)-1], `\`) && k+1 < len(body) {
		parts[len(parts)-1] = strings.TrimSpace(strings.TrimSuffix(parts[len(parts)-1], `\`))
		k++
		parts = append(parts, strings.TrimSpace(body[k]))
	}
	return strings.Join(parts, " "), k
}

// inlineMakeTargets are the targets of the `make ...` inline code of a
// line (variables such as OFO_DIR=... aside).
func inlineMakeTargets(line string) []string {
	var out []string
	for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
		code := strings.TrimSuffix(strings.TrimSpace(m[1]), " ...")
		if !makeInline.MatchString(code) {
			continue
		}
		for _, f := range strings.Fields(code)[1:] {
			if !strings.Contains(f, "=") {
				out = append(out, f)
			}
		}
	}
	return out
}

// docFiles are the files whose commands the suite runs, relative to root:
// README.md and docs/*.md.
func docFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	out := []string{"README.md"}
	for _, f := range files {
		out = append(out, filepath.Join("docs", filepath.Base(f)))
	}
	return out, nil
}

// TestExtract: the convention, read as docs_test.go states it.
func TestExtract(t *testing.T) {
	tests := []struct {
		name         string
		markdown     string
		wantCommands []command
		wantTargets  []string
		wantProblems []string
	}{
		{
			name:     "sh: every line a command, comments and blank lines aside, continued lines joined",
			markdown: "text\n\n```sh\n# a comment\nmake demo\n\nkubectl get pods \\\n  -n shop\n```\n",
			wantCommands: []command{
				{text: "make demo", where: "x.md:5"},
				{text: "kubectl get pods -n shop", where: "x.md:7"},
			},
		},
		{
			name:     "console: $ lines are commands, the lines after them output",
			markdown: "```console\n$ flagplane explain a\nline 1\n...\n  line 2\n$ flagplane explain b\n```\n",
			wantCommands: []command{
				{text: "flagplane explain a", output: []string{"line 1", "...", "  line 2"}, where: "x.md:2"},
				{text: "flagplane explain b", where: "x.md:6"},
			},
		},
		{
			name:     "a fence inside a list item",
			markdown: "- item:\n\n  ```sh\n  kubectl apply -k config/policy\n  ```\n",
			wantCommands: []command{
				{text: "kubectl apply -k config/policy", where: "x.md:4"},
			},
		},
		{
			name:     "other blocks are not run",
			markdown: "```yaml\nkind: X\n```\n\n```text\n    $ curl indented output\n```\n    not fenced\n",
		},
		{
			name:         "a prompt in a text block is a problem",
			markdown:     "```text\n$ make demo\n```\n",
			wantProblems: []string{`x.md:2: a prompt in a "text" block: mark it console, or leave the prompt out`},
		},
		{
			name:         "a prompt in an indented block is a problem",
			markdown:     "para\n\n    $ make demo\n",
			wantProblems: []string{"x.md:3: a prompt outside a console block"},
		},
		{
			name:         "output before the first command is a problem",
			markdown:     "```console\noutput\n$ make demo\n```\n",
			wantCommands: []command{{text: "make demo", where: "x.md:3"}},
			wantProblems: []string{"x.md:2: output before the first command of a console block"},
		},
		{
			name:         "an unclosed block is a problem",
			markdown:     "```sh\nmake demo\n",
			wantCommands: []command{{text: "make demo", where: "x.md:2"}},
			wantProblems: []string{"x.md:1: a code block that is never closed"},
		},
		{
			name:        "make targets of inline code",
			markdown:    "Run `make test`, `make generate manifests`, `make conformance OFO_DIR=...` or `make image IMAGE=x`; not `make`, `go test` or `make -n x`.\n",
			wantTargets: []string{"test", "generate", "manifests", "conformance", "image"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d := extract(tt.markdown, "x.md")
			g.Expect(d.commands).To(Equal(tt.wantCommands))
			g.Expect(d.makeTargets).To(Equal(tt.wantTargets))
			g.Expect(d.problems).To(Equal(tt.wantProblems))
		})
	}
}

// TestShownOutput: the shown lines must appear in order, spaces aside.
func TestShownOutput(t *testing.T) {
	out := "Deployment shop/web\n  sources that apply:\n    - FeatureFlagSource   shop/by-name\n  sidecar:\n    image: x\n"
	tests := []struct {
		name    string
		shown   []string
		missing string
	}{
		{name: "all, in order", shown: []string{"Deployment shop/web", "...", "- FeatureFlagSource shop/by-name", "image: x"}},
		{name: "part of a line", shown: []string{"sources that", "image"}},
		{name: "text left out within a line", shown: []string{"- FeatureFlagSource ... shop/by-name", "image: ..."}},
		{name: "text left out, the rest absent", shown: []string{"- FeatureFlagSource ... shop/by-label"}, missing: "- FeatureFlagSource ... shop/by-label"},
		{name: "text left out, out of order", shown: []string{"shop/by-name ... FeatureFlagSource"}, missing: "shop/by-name ... FeatureFlagSource"},
		{name: "absent", shown: []string{"Deployment shop/web", "Deployment shop/api"}, missing: "Deployment shop/api"},
		{name: "out of order", shown: []string{"sidecar:", "Deployment shop/web"}, missing: "Deployment shop/web"},
		{name: "nothing shown", shown: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(missingLine(tt.shown, out)).To(Equal(tt.missing))
		})
	}
}

// missingLine is the first shown line (blank lines and "..." aside) that
// does not appear in out after the lines before it, or "". Within a line,
// "..." stands for text left out.
func missingLine(shown []string, out string) string {
	actual := strings.Split(out, "\n")
	for i, l := range actual {
		actual[i] = strings.Join(strings.Fields(l), " ")
	}
	pos := 0
	for _, s := range shown {
		want := strings.Join(strings.Fields(s), " ")
		if want == "" || want == "..." {
			continue
		}
		found := false
		for pos < len(actual) {
			pos++
			if matchesElided(actual[pos-1], want) {
				found = true
				break
			}
		}
		if !found {
			return s
		}
	}
	return ""
}

// matchesElided says whether line holds want's parts between "...", in
// order.
func matchesElided(line, want string) bool {
	for _, part := range strings.Split(want, "...") {
		part = strings.TrimSpace(part)
		i := strings.Index(line, part)
		if i < 0 {
			return false
		}
		line = line[i+len(part):]
	}
	return true
}
