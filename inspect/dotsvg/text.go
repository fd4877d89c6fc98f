package dotsvg

import (
	"strconv"
	"strings"
)

// label is a node's or an edge's text, in lines.
type label struct {
	lines    []line
	fontSize float64
	w, h     float64
}

type line struct {
	text string
	// anchor is the SVG text-anchor: middle for \n, start for \l, end for \r.
	anchor string
}

// lineHeight is Graphviz's: 1.2 times the font size.
const lineHeight = 1.2

// parseLabel splits a DOT label into lines by its escapes: \n ends a
// centred line, \l a left-justified one, \r a right-justified one; \N is
// the node's name and \G the graph's; \\ is a backslash.
func parseLabel(s, nodeName, graphName string, fontSize float64) label {
	var l label
	l.fontSize = fontSize
	var b strings.Builder
	end := func(anchor string) {
		l.lines = append(l.lines, line{text: b.String(), anchor: anchor})
		b.Reset()
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			end("middle")
		case 'l':
			end("start")
		case 'r':
			end("end")
		case 'N':
			b.WriteString(nodeName)
		case 'G':
			b.WriteString(graphName)
		default:
			b.WriteByte(s[i])
		}
	}
	if b.Len() > 0 || len(l.lines) == 0 {
		end("middle")
	}
	for _, ln := range l.lines {
		l.w = max(l.w, textWidth(ln.text, fontSize))
	}
	if s == "" {
		l.lines = nil
	}
	l.h = float64(len(l.lines)) * fontSize * lineHeight
	return l
}

// textWidth is the width of s in Helvetica of size fontSize, in points.
func textWidth(s string, fontSize float64) float64 {
	var units int
	for _, r := range s {
		switch {
		case r >= ' ' && int(r-' ') < len(helvetica):
			units += int(helvetica[r-' '])
		case isWide(r):
			units += 1000
		default:
			units += 556
		}
	}
	return float64(units) * fontSize / 1000
}

// isWide reports the East Asian wide runes, which take a full em.
func isWide(r rune) bool {
	return r >= 0x1100 && r <= 0x115f || r >= 0x2e80 && r <= 0xa4cf || r >= 0xac00 && r <= 0xd7a3 ||
		r >= 0xf900 && r <= 0xfaff || r >= 0xfe30 && r <= 0xfe4f || r >= 0xff00 && r <= 0xff60 ||
		r >= 0xffe0 && r <= 0xffe6 || r >= 0x20000 && r <= 0x3fffd
}

// helvetica are the advance widths of Helvetica (its AFM, in thousandths
// of an em) for ' ' through '~': the metrics Graphviz uses when it has no
// fonts, and close to Arial's, the usual stand-in.
var helvetica = [...]uint16{
	278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, // space to /
	556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556, // 0 to ?
	1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, // @ to O
	667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556, // P to _
	333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, // ` to o
	556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584, // p to ~
}

// fontSize reads a fontsize attribute, Graphviz's 14 if it has none or a
// bad one.
func fontSize(attrs map[string]string) float64 {
	if f, err := strconv.ParseFloat(attrs["fontsize"], 64); err == nil && f >= 1 && f <= 200 {
		return f
	}
	return 14
}
