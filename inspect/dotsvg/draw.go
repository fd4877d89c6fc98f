package dotsvg

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Render lays out the digraph dot left to right and draws it as SVG. The
// bytes depend only on dot.
func Render(dot []byte) ([]byte, error) {
	g, err := parse(dot)
	if err != nil {
		return nil, err
	}
	l, err := lay(g)
	if err != nil {
		return nil, err
	}
	return l.svg(), nil
}

// svg draws the laid-out graph: edges first, so that nodes cover their ends.
func (l *layout) svg() []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="no"?>` + "\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%spt" height="%spt" viewBox="0 0 %s %s">`+"\n",
		num(l.width), num(l.height), num(l.width), num(l.height))
	if l.g.name != "" {
		fmt.Fprintf(&b, "<title>%s</title>\n", esc(l.g.name))
	}
	b.WriteString(`<g id="graph0" class="graph" font-family="Helvetica,Arial,sans-serif">` + "\n")
	fmt.Fprintf(&b, `<rect width="%s" height="%s" fill="white"/>`+"\n", num(l.width), num(l.height))
	ports := l.ports()
	for i, e := range l.g.edges {
		if hasStyle(e.attrs, "invis") {
			continue
		}
		fmt.Fprintf(&b, `<g id="edge%d" class="edge">`+"\n<title>%s&#45;&gt;%s</title>\n", i+1, esc(e.from.id), esc(e.to.id))
		if e.from == e.to {
			l.drawLoop(&b, e)
		} else {
			l.drawEdge(&b, e, ports)
		}
		b.WriteString("</g>\n")
	}
	for i, n := range l.g.nodes {
		if hasStyle(n.attrs, "invis") {
			continue
		}
		fmt.Fprintf(&b, `<g id="node%d" class="node">`+"\n<title>%s</title>\n", i+1, esc(n.id))
		drawNode(&b, n)
		b.WriteString("</g>\n")
	}
	b.WriteString("</g>\n</svg>\n")
	return b.Bytes()
}

// shapeOf is the shape a node is drawn as.
func shapeOf(n *node) string {
	switch s := strings.ToLower(n.attrs["shape"]); s {
	case "box", "rect", "rectangle", "square":
		return "box"
	case "note", "folder", "component", "box3d", "octagon":
		return s
	case "", "ellipse", "oval", "circle":
		return "ellipse"
	case "plaintext", "plain", "none":
		return "none"
	default:
		return "box"
	}
}

// drawNode draws n's shape and label.
func drawNode(b *bytes.Buffer, n *node) {
	stroke, fill := color(n.attrs["color"], "black"), "white"
	if hasStyle(n.attrs, "filled") {
		fill = color(n.attrs["fillcolor"], color(n.attrs["color"], "lightgrey"))
	}
	paint := fmt.Sprintf(`fill="%s" stroke="%s"%s`, fill, stroke, strokeStyle(n.attrs))
	l, r, t, bt := n.x-n.w/2, n.x+n.w/2, n.y-n.h/2, n.y+n.h/2
	switch shapeOf(n) {
	case "box":
		polygon(b, paint, l, t, r, t, r, bt, l, bt)
	case "note":
		const fold = 6
		polygon(b, paint, l, t, r-fold, t, r, t+fold, r, bt, l, bt)
		polyline(b, stroke, r-fold, t, r-fold, t+fold, r, t+fold)
	case "folder":
		polygon(b, paint, l, t+4, r-27, t+4, r-24, t, r-3, t, r, t+4, r, bt, l, bt)
	case "component":
		polygon(b, paint, l+4, t, r, t, r, bt, l+4, bt, l+4, bt-4, l, bt-4, l, bt-8, l+4, bt-8, l+4, t+8, l, t+8, l, t+4, l+4, t+4)
		polyline(b, stroke, l+4, t+4, l+8, t+4, l+8, t+8, l+4, t+8)
		polyline(b, stroke, l+4, bt-8, l+8, bt-8, l+8, bt-4, l+4, bt-4)
	case "box3d":
		const d = 4
		polygon(b, paint, l+d, t, r, t, r, bt-d, r-d, bt, l, bt, l, t+d)
		polyline(b, stroke, l, t+d, r-d, t+d, r, t)
		polyline(b, stroke, r-d, t+d, r-d, bt)
	case "octagon":
		cx, cy := n.h*0.3, n.h*0.3
		polygon(b, paint, l+cx, t, r-cx, t, r, t+cy, r, bt-cy, r-cx, bt, l+cx, bt, l, bt-cy, l, t+cy)
	case "ellipse":
		fmt.Fprintf(b, `<ellipse %s cx="%s" cy="%s" rx="%s" ry="%s"/>`+"\n", paint, num(n.x), num(n.y), num(n.w/2), num(n.h/2))
	}
	drawLabel(b, n.label, n.x, n.y, color(n.attrs["fontcolor"], "black"), false)
}

// drawLabel draws a label centred on x, y; with halo, on a white outline
// that keeps it readable over edges.
func drawLabel(b *bytes.Buffer, lb label, x, y float64, fill string, halo bool) {
	step := lb.fontSize * lineHeight
	// Graphviz's baselines: the block centred, each baseline three
	// quarters down its line.
	base := y - lb.h/2 + 0.75*step
	extra := ""
	if halo {
		extra = ` stroke="white" stroke-width="3" paint-order="stroke"`
	}
	for i, ln := range lb.lines {
		tx := x
		switch ln.anchor {
		case "start":
			tx = x - lb.w/2
		case "end":
			tx = x + lb.w/2
		}
		fmt.Fprintf(b, `<text text-anchor="%s" x="%s" y="%s" font-size="%s" fill="%s"%s>%s</text>`+"\n",
			ln.anchor, num(tx), num(base+float64(i)*step), num(lb.fontSize), fill, extra, esc(ln.text))
	}
}

// port is where an edge leaves or meets a node: the offset from the
// node's centre across the ranks.
type port struct{ start, end float64 }

// ports spreads the edges that leave or meet each node along its side, in
// the order of their other ends, so that they do not start at one point.
func (l *layout) ports() map[*edge]port {
	ports := map[*edge]port{}
	leaving := map[*node][]*edge{}
	meeting := map[*node][]*edge{}
	for _, e := range l.g.edges {
		if len(e.chain) < 2 {
			continue
		}
		first, last := e.chain[0], e.chain[len(e.chain)-1]
		leaving[first] = append(leaving[first], e)
		meeting[last] = append(meeting[last], e)
	}
	spread := func(n *node, es []*edge, other func(*edge) *node, set func(*edge, float64)) {
		slices.SortStableFunc(es, func(a, b *edge) int {
			if c := compareFloat(other(a).y+other(a).lineDY, other(b).y+other(b).lineDY); c != 0 {
				return c
			}
			return other(a).order - other(b).order
		})
		step := min(6, (n.h-2*marginY)/float64(len(es)))
		for i, e := range es {
			set(e, (float64(i)-float64(len(es)-1)/2)*step)
		}
	}
	for _, n := range l.g.nodes {
		if es := leaving[n]; len(es) > 0 {
			spread(n, es, func(e *edge) *node { return e.chain[1] }, func(e *edge, d float64) {
				p := ports[e]
				p.start = d
				ports[e] = p
			})
		}
		if es := meeting[n]; len(es) > 0 {
			spread(n, es, func(e *edge) *node { return e.chain[len(e.chain)-2] }, func(e *edge, d float64) {
				p := ports[e]
				p.end = d
				ports[e] = p
			})
		}
	}
	return ports
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type point struct{ x, y float64 }

// drawEdge draws e along its chain: a curve with level ends between
// ranks, a straight line through the slot in each rank it crosses.
func (l *layout) drawEdge(b *bytes.Buffer, e *edge, ports map[*edge]port) {
	stroke := color(e.attrs["color"], "black")
	first, last := e.chain[0], e.chain[len(e.chain)-1]
	p := ports[e]
	start := point{first.x + border(first, p.start), first.y + p.start}
	end := point{last.x - border(last, p.end), last.y + p.end}
	arrow := e.attrs["arrowhead"] != "none"
	tip := end
	if arrow && e.reversed {
		tip = start
		start.x += arrowLen
	} else if arrow {
		end.x -= arrowLen
	}
	var d strings.Builder
	fmt.Fprintf(&d, "M%s,%s", num(start.x), num(start.y))
	prev := start
	curve := func(to point) {
		dx := (to.x - prev.x) / 2
		fmt.Fprintf(&d, "C%s,%s %s,%s %s,%s", num(prev.x+dx), num(prev.y), num(to.x-dx), num(to.y), num(to.x), num(to.y))
		prev = to
	}
	for _, v := range e.chain[1 : len(e.chain)-1] {
		// A rank of edges only has nothing to go around: one curve
		// crosses it.
		if l.colW[v.rank] == 0 {
			continue
		}
		y := v.y + v.lineDY
		curve(point{l.colX[v.rank] - l.colW[v.rank]/2, y})
		prev = point{l.colX[v.rank] + l.colW[v.rank]/2, y}
		fmt.Fprintf(&d, "L%s,%s", num(prev.x), num(prev.y))
	}
	curve(end)
	fmt.Fprintf(b, `<path fill="none" stroke="%s"%s d="%s"/>`+"\n", stroke, strokeStyle(e.attrs), d.String())
	if arrow {
		dir := -1.0 // pointing right, its base to the left of the tip
		if e.reversed {
			dir = 1
		}
		base := tip.x + dir*arrowLen
		fmt.Fprintf(b, `<polygon fill="%s" stroke="%s" points="%s,%s %s,%s %s,%s"/>`+"\n", stroke, stroke,
			num(base), num(tip.y-3.5), num(tip.x), num(tip.y), num(base), num(tip.y+3.5))
	}
	if v := e.labelAt; v != nil {
		drawLabel(b, e.label, v.x, v.y-v.h/2+e.label.h/2, color(e.attrs["fontcolor"], "black"), false)
	}
}

// border is how far right of n's centre its outline is, dy off its centre
// line.
func border(n *node, dy float64) float64 {
	if shapeOf(n) == "ellipse" {
		ry := n.h / 2
		return n.w / 2 * math.Sqrt(max(0, 1-dy*dy/(ry*ry)))
	}
	return n.w / 2
}

// drawLoop draws a self-loop on the right of its node.
func (l *layout) drawLoop(b *bytes.Buffer, e *edge) {
	n := e.from
	r := n.x + border(n, 0)
	stroke := color(e.attrs["color"], "black")
	fmt.Fprintf(b, `<path fill="none" stroke="%s"%s d="M%s,%sC%s,%s %s,%s %s,%s"/>`+"\n", stroke, strokeStyle(e.attrs),
		num(r), num(n.y-5), num(r+loopWidth-6), num(n.y-loopWidth/2), num(r+loopWidth-6), num(n.y+5), num(r+arrowLen), num(n.y+5))
	fmt.Fprintf(b, `<polygon fill="%s" stroke="%s" points="%s,%s %s,%s %s,%s"/>`+"\n", stroke, stroke,
		num(r+arrowLen), num(n.y+1.5), num(r), num(n.y+5), num(r+arrowLen), num(n.y+8.5))
	if len(e.label.lines) > 0 {
		drawLabel(b, e.label, r+loopWidth, n.y-loopWidth/2-e.label.h/2, color(e.attrs["fontcolor"], "black"), true)
	}
}

func polygon(b *bytes.Buffer, paint string, xy ...float64) {
	fmt.Fprintf(b, `<polygon %s points="%s"/>`+"\n", paint, points(xy))
}

func polyline(b *bytes.Buffer, stroke string, xy ...float64) {
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" points="%s"/>`+"\n", stroke, points(xy))
}

func points(xy []float64) string {
	parts := make([]string, 0, len(xy)/2)
	for i := 0; i+1 < len(xy); i += 2 {
		parts = append(parts, num(xy[i])+","+num(xy[i+1]))
	}
	return strings.Join(parts, " ")
}

// hasStyle reports whether attrs' style lists s.
func hasStyle(attrs map[string]string, s string) bool {
	for _, part := range strings.Split(attrs["style"], ",") {
		if strings.TrimSpace(part) == s {
			return true
		}
	}
	return false
}

// strokeStyle is the SVG of the dashed, dotted and bold styles and of
// penwidth.
func strokeStyle(attrs map[string]string) string {
	s := penWidth(attrs)
	switch {
	case hasStyle(attrs, "dashed"):
		s += ` stroke-dasharray="5,2"`
	case hasStyle(attrs, "dotted"):
		s += ` stroke-dasharray="1,5"`
	}
	return s
}

func penWidth(attrs map[string]string) string {
	if w, err := strconv.ParseFloat(attrs["penwidth"], 64); err == nil && w > 0 && w <= 20 {
		return ` stroke-width="` + num(w) + `"`
	}
	if hasStyle(attrs, "bold") {
		return ` stroke-width="2"`
	}
	return ""
}

// color is c if it is a colour SVG can take as is (#rgb, #rrggbb or a
// name), def if not.
func color(c, def string) string {
	if c == "" || len(c) > 32 {
		return def
	}
	for i := 0; i < len(c); i++ {
		ch := c[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '#' && i == 0) {
			return def
		}
	}
	if c[0] == '#' && len(c) != 4 && len(c) != 7 && len(c) != 9 {
		return def
	}
	return c
}

// num formats a coordinate with at most two decimals.
func num(v float64) string {
	v = math.Round(v*100) / 100
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// esc escapes s for XML text and attribute values, replacing what XML
// cannot hold.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
