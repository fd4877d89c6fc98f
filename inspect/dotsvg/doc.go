// Package dotsvg draws a Graphviz digraph as SVG in pure Go: no cgo, no
// `dot` command, no WebAssembly. It reads the part of the DOT language that
// topology.DOT writes (node and edge statements with attribute lists, the
// node and edge defaults, graph attributes) and lays the graph out left to
// right in layers, as Graphviz's dot does with rankdir=LR: ranks by longest
// path, crossings reduced by barycentre sweeps, nodes placed to keep edges
// straight, edges drawn as curves through their own slots between the nodes
// of the ranks they cross.
//
// It draws the node shapes topology.DOT uses (box, note, folder, component,
// box3d, octagon), ellipse (DOT's default) and plaintext; other shapes as a
// box. It draws the styles filled, dashed, dotted, bold and invis, colours
// given as names or #rrggbb, and labels on several lines (\n, \l, \r).
// Text is measured with Helvetica's metrics, as Graphviz measures it when
// it has no fonts. rankdir is ignored: the layout is always left to right.
//
// Other DOT (subgraphs, ports, HTML labels, undirected graphs) is refused
// with an error: `flagplane topology | dot -Tsvg` draws anything with
// Graphviz.
//
// The bytes of the SVG depend only on the DOT, so that drawings can be
// golden files.
//
// See docs/topology-rendering.md for why flagplane draws its own.
package dotsvg
