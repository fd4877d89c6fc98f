package dotsvg

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// graph is a parsed digraph: its nodes in the order they were first
// mentioned, its edges in the order they were given.
type graph struct {
	name  string
	attrs map[string]string
	nodes []*node
	edges []*edge
	byID  map[string]*node
}

// node is a node of the graph, or a virtual node that the layout puts
// where an edge crosses a rank.
type node struct {
	id    string
	attrs map[string]string
	// index is the node's place in graph.nodes, where the layout keeps
	// per-node slices.
	index   int
	virtual bool

	// Set by the layout.
	rank  int
	order int
	w, h  float64 // along the ranks (x) and across them (y)
	x, y  float64 // centre
	// in and out are the node's neighbours in the layered graph: the
	// previous and next nodes of the edge chains through it.
	in, out []*node
	label   label
	// lineDY is how far below the centre of a virtual node its edge runs:
	// the one that holds an edge's label has the text above the edge.
	lineDY float64
	// isolated is set for a node without edges.
	isolated bool
}

// edge is an edge as given; the layout routes it through chain.
type edge struct {
	from, to *node
	attrs    map[string]string
	// reversed is set when the edge closes a cycle: it is laid out from to
	// to from and drawn with its arrowhead at the start of chain.
	reversed bool
	// chain is from (or to, if reversed), the virtual nodes, then the other
	// end, in rank order.
	chain []*node
	label label
	// labelAt is the virtual node of chain that holds the label.
	labelAt *node
}

// maxDOT bounds the input: a topology of tens of thousands of objects
// stays far below it, and a layout this package would take minutes on
// never starts.
const maxDOT = 8 << 20

// parse reads one digraph.
func parse(src []byte) (*graph, error) {
	if len(src) > maxDOT {
		return nil, fmt.Errorf("DOT of %d bytes: more than the %d this renderer lays out", len(src), maxDOT)
	}
	p := &parser{lex: lexer{src: string(src), line: 1}}
	g, err := p.graph()
	if err != nil {
		return nil, fmt.Errorf("DOT line %d: %w", p.lex.line, err)
	}
	return g, nil
}

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokID
	tokPunct // { } [ ] ; , = and the edge operators -> and --
)

type token struct {
	kind tokenKind
	text string
	// quoted is set for a "..." ID, which is never a keyword.
	quoted bool
}

type parser struct {
	lex  lexer
	peek *token
	g    *graph
	// defaults are the attributes of `node [...]` and `edge [...]`
	// statements, applied to what comes after them.
	nodeDefaults, edgeDefaults map[string]string
}

func (p *parser) next() (token, error) {
	if p.peek != nil {
		t := *p.peek
		p.peek = nil
		return t, nil
	}
	return p.lex.next()
}

func (p *parser) look() (token, error) {
	if p.peek == nil {
		t, err := p.lex.next()
		if err != nil {
			return token{}, err
		}
		p.peek = &t
	}
	return *p.peek, nil
}

func (p *parser) expect(punct string) error {
	t, err := p.next()
	if err != nil {
		return err
	}
	if t.kind != tokPunct || t.text != punct {
		return fmt.Errorf("expected %q, found %s", punct, t)
	}
	return nil
}

func (t token) String() string {
	if t.kind == tokEOF {
		return "the end of the input"
	}
	return fmt.Sprintf("%q", t.text)
}

// keyword reports whether t is the keyword kw (DOT keywords are
// case-insensitive).
func (t token) keyword(kw string) bool {
	return t.kind == tokID && !t.quoted && strings.EqualFold(t.text, kw)
}

func (p *parser) graph() (*graph, error) {
	t, err := p.next()
	if err != nil {
		return nil, err
	}
	if t.keyword("strict") {
		if t, err = p.next(); err != nil {
			return nil, err
		}
	}
	if t.keyword("graph") {
		return nil, fmt.Errorf("an undirected graph: only digraphs are drawn")
	}
	if !t.keyword("digraph") {
		return nil, fmt.Errorf("expected \"digraph\", found %s", t)
	}
	p.g = &graph{attrs: map[string]string{}, byID: map[string]*node{}}
	p.nodeDefaults, p.edgeDefaults = map[string]string{}, map[string]string{}
	if t, err = p.next(); err != nil {
		return nil, err
	}
	if t.kind == tokID {
		p.g.name = t.text
		if t, err = p.next(); err != nil {
			return nil, err
		}
	}
	if t.kind != tokPunct || t.text != "{" {
		return nil, fmt.Errorf("expected \"{\", found %s", t)
	}
	for {
		t, err := p.look()
		if err != nil {
			return nil, err
		}
		switch {
		case t.kind == tokPunct && t.text == "}":
			p.peek = nil
			if t, err := p.next(); err != nil {
				return nil, err
			} else if t.kind != tokEOF {
				return nil, fmt.Errorf("%s after the end of the graph", t)
			}
			return p.g, nil
		case t.kind == tokPunct && t.text == ";":
			p.peek = nil
		case t.kind == tokEOF:
			return nil, fmt.Errorf("the graph is not closed with \"}\"")
		default:
			if err := p.statement(); err != nil {
				return nil, err
			}
		}
	}
}

func (p *parser) statement() error {
	t, err := p.next()
	if err != nil {
		return err
	}
	switch {
	case t.keyword("subgraph") || t.kind == tokPunct && t.text == "{":
		return fmt.Errorf("subgraphs are not drawn")
	case t.keyword("graph"):
		return p.attrList(p.g.attrs)
	case t.keyword("node"):
		return p.attrList(p.nodeDefaults)
	case t.keyword("edge"):
		return p.attrList(p.edgeDefaults)
	case t.kind != tokID:
		return fmt.Errorf("expected a statement, found %s", t)
	}
	la, err := p.look()
	if err != nil {
		return err
	}
	switch {
	case la.kind == tokPunct && la.text == "=":
		p.peek = nil
		v, err := p.next()
		if err != nil {
			return err
		}
		if v.kind != tokID {
			return fmt.Errorf("expected a value for %q, found %s", t.text, v)
		}
		p.g.attrs[t.text] = v.text
		return nil
	case la.kind == tokPunct && la.text == "--":
		return fmt.Errorf("an undirected edge \"--\" in a digraph")
	case la.kind == tokPunct && la.text == "->":
		return p.edgeStatement(t.text)
	case la.kind == tokPunct && la.text == ":":
		return fmt.Errorf("node ports are not drawn")
	}
	n := p.node(t.text)
	return p.attrList(n.attrs)
}

// edgeStatement reads `a -> b -> c [attrs]` after a.
func (p *parser) edgeStatement(first string) error {
	ids := []string{first}
	for {
		la, err := p.look()
		if err != nil {
			return err
		}
		if la.kind != tokPunct || la.text != "->" {
			break
		}
		p.peek = nil
		t, err := p.next()
		if err != nil {
			return err
		}
		if t.kind != tokID {
			if t.kind == tokPunct && t.text == "{" {
				return fmt.Errorf("subgraphs are not drawn")
			}
			return fmt.Errorf("expected a node after \"->\", found %s", t)
		}
		ids = append(ids, t.text)
	}
	attrs := map[string]string{}
	for k, v := range p.edgeDefaults {
		attrs[k] = v
	}
	if err := p.attrList(attrs); err != nil {
		return err
	}
	for i := 1; i < len(ids); i++ {
		e := &edge{from: p.node(ids[i-1]), to: p.node(ids[i]), attrs: attrs}
		p.g.edges = append(p.g.edges, e)
	}
	return nil
}

// node returns the node id, adding it with the current node defaults if it
// is new.
func (p *parser) node(id string) *node {
	if n, ok := p.g.byID[id]; ok {
		return n
	}
	n := &node{id: id, attrs: map[string]string{}, index: len(p.g.nodes)}
	for k, v := range p.nodeDefaults {
		n.attrs[k] = v
	}
	p.g.nodes = append(p.g.nodes, n)
	p.g.byID[id] = n
	return n
}

// attrList reads any number of `[k=v, ...]` into into.
func (p *parser) attrList(into map[string]string) error {
	for {
		la, err := p.look()
		if err != nil {
			return err
		}
		if la.kind != tokPunct || la.text != "[" {
			return nil
		}
		p.peek = nil
		for {
			t, err := p.next()
			if err != nil {
				return err
			}
			if t.kind == tokPunct && t.text == "]" {
				break
			}
			if t.kind == tokPunct && (t.text == "," || t.text == ";") {
				continue
			}
			if t.kind != tokID {
				return fmt.Errorf("expected an attribute, found %s", t)
			}
			if err := p.expect("="); err != nil {
				return err
			}
			v, err := p.next()
			if err != nil {
				return err
			}
			if v.kind != tokID {
				return fmt.Errorf("expected a value for %q, found %s", t.text, v)
			}
			into[t.text] = v.text
		}
	}
}

// lexer splits DOT into tokens.
type lexer struct {
	src  string
	pos  int
	line int
}

func (l *lexer) next() (token, error) {
	if err := l.skipSpace(); err != nil {
		return token{}, err
	}
	if l.pos >= len(l.src) {
		return token{kind: tokEOF}, nil
	}
	c := l.src[l.pos]
	switch {
	case strings.HasPrefix(l.src[l.pos:], "->"), strings.HasPrefix(l.src[l.pos:], "--"):
		l.pos += 2
		return token{kind: tokPunct, text: l.src[l.pos-2 : l.pos]}, nil
	case strings.IndexByte("{}[];,=:", c) >= 0:
		l.pos++
		return token{kind: tokPunct, text: string(c)}, nil
	case c == '"':
		return l.quoted()
	case c == '<':
		return token{}, fmt.Errorf("HTML-like labels are not drawn")
	case c == '-' || c == '.' || c >= '0' && c <= '9':
		start := l.pos
		l.pos++
		for l.pos < len(l.src) && (l.src[l.pos] == '.' || l.src[l.pos] >= '0' && l.src[l.pos] <= '9') {
			l.pos++
		}
		return token{kind: tokID, text: l.src[start:l.pos]}, nil
	}
	// An ID: letters, digits and _, not starting with a digit; any byte
	// outside ASCII counts as a letter, as in Graphviz.
	if r, _ := utf8.DecodeRuneInString(l.src[l.pos:]); r != '_' && !unicode.IsLetter(r) && r < utf8.RuneSelf {
		return token{}, fmt.Errorf("unexpected %q", r)
	}
	start := l.pos
	for l.pos < len(l.src) {
		r, size := utf8.DecodeRuneInString(l.src[l.pos:])
		if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) && r < utf8.RuneSelf {
			break
		}
		l.pos += size
	}
	return token{kind: tokID, text: l.src[start:l.pos]}, nil
}

// quoted reads a "..." ID. Only \" is an escape of the lexer (and a
// backslash before a newline joins lines); other backslashes stay, for
// labels to read \n, \l and \r.
func (l *lexer) quoted() (token, error) {
	l.pos++
	var b strings.Builder
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '"':
			l.pos++
			return token{kind: tokID, text: b.String(), quoted: true}, nil
		case c == '\\' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '"':
			b.WriteByte('"')
			l.pos += 2
		case c == '\\' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '\n':
			l.line++
			l.pos += 2
		default:
			if c == '\n' {
				l.line++
			}
			b.WriteByte(c)
			l.pos++
		}
	}
	return token{}, fmt.Errorf("a quoted string is not closed")
}

// skipSpace skips white space and comments: // and /* */, and lines that
// start with # (C preprocessor output, by the DOT grammar).
func (l *lexer) skipSpace() error {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == ' ' || c == '\t' || c == '\r':
			l.pos++
		case c == '#' && (l.pos == 0 || l.src[l.pos-1] == '\n'), strings.HasPrefix(l.src[l.pos:], "//"):
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case strings.HasPrefix(l.src[l.pos:], "/*"):
			end := strings.Index(l.src[l.pos+2:], "*/")
			if end < 0 {
				return fmt.Errorf("a /* comment is not closed")
			}
			l.line += strings.Count(l.src[l.pos:l.pos+2+end], "\n")
			l.pos += 2 + end + 2
		default:
			return nil
		}
	}
	return nil
}
