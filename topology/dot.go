package topology

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// edgeStyle is how a relation is drawn.
var edgeStyle = map[rel]string{
	relRefs:    `style=bold`,
	relRenders: `style=dotted`,
	relMounts:  `style=solid`,
	relTargets: `style=dashed`,
	relServes:  `style=bold, color="#38761d"`,
}

// DOT renders the view as a Graphviz digraph. The bytes depend only on the
// graph: nodes come sorted by key, each followed by its edges sorted by
// child. Reference edges are labelled with the providers that resolve them.
func (v *View) DOT() []byte {
	var b bytes.Buffer
	b.WriteString("digraph topology {\n")
	b.WriteString("  rankdir=LR;\n")
	b.WriteString("  node [fontname=\"Helvetica\", fontsize=10];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=9];\n")
	keys := sortedKeys(v.state.g.nodes.keys())
	for _, k := range keys {
		label := string(k.Kind) + `\n` + k.Namespace + "/" + k.Name
		if k.Kind == KindConfigMap {
			label += `\n` + ConfigMapName(k.FlagSet())
		}
		fmt.Fprintf(&b, "  %s [label=%s, %s];\n", quote(k.String()), quote(label), nodeStyleOf(k.Kind))
	}
	for _, k := range keys {
		n, _ := v.state.g.node(k)
		for _, c := range sortedKeys(n.out.keys()) {
			r, _ := n.out.get(c)
			fmt.Fprintf(&b, "  %s -> %s [%s, comment=%q", quote(k.String()), quote(c.String()), edgeStyle[r], r.String())
			if r == relRefs {
				fmt.Fprintf(&b, ", label=%s", quote(strings.Join(refProviders(n.payload.source.refs, c), ",")))
			}
			b.WriteString("];\n")
		}
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// refProviders lists, in spec order and once each, the providers of the
// resolved refs to f.
func refProviders(refs []FlagSetRef, f Key) []string {
	var out []string
	for _, r := range refs {
		if r.FlagSet == f && r.State == RefResolved && !slices.Contains(out, r.Provider) {
			out = append(out, r.Provider)
		}
	}
	return out
}

// quote makes a DOT quoted string (DOT escapes only the double quote; a
// backslash starts an escape such as \n, which labels use on purpose).
func quote(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// nodeStyle is how a node of kind k is drawn (nodeKinds); other owners of
// pods have no style.
func nodeStyleOf(k Kind) string {
	if i := kindIndex(k); i >= 0 && nodeKinds[i].kind == k {
		return nodeKinds[i].style
	}
	return ""
}
