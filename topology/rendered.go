package topology

import "github.com/flagplane/flagplane/api/v1beta1"

// Rendered is what a flag set serves, computed once per FeatureFlag object
// when the topology takes it (WithFlagSetRendering): the flagd document its
// ConfigMaps hold and the sync server serves, its revision, and whether
// flagd can load it. Every reader (the ConfigMap and status workflows, the
// sync server, explain) reads it from a View instead of rendering the flag
// set again, so that an edit is rendered, validated and hashed once however
// many namespaces consume it. It is shared: do not modify it.
type Rendered struct {
	// Content is the flagd JSON document of the flag set; "" when it
	// cannot be rendered.
	Content string
	// Revision is the content hash of Content, which status reports; ""
	// with it.
	Revision string
	// Err says why the flag set cannot be served (flagd cannot load it, or
	// it has warnings and validation is strict): its consumers keep its
	// last valid content. Nil when it can be served.
	Err error
	// Warnings are what flagd loads but is probably a mistake, whatever
	// the strictness.
	Warnings []string
}

// Valid tells whether the flag set can be served.
func (r Rendered) Valid() bool { return r.Err == nil }

// WithFlagSetRendering gives the topology the function that renders,
// validates and hashes a flag set (flagsets.Validator.TopologyOptions); it
// runs once per FeatureFlag object whose spec differs from the one the
// topology held, never for an object it has seen the spec of. A source's
// status says whether the flag sets it resolves are served, so the Delta
// of a flag-set edit that makes it valid or invalid names the sources that
// resolve it.
//
// Without it every flag set is valid and renders to nothing: enough for
// questions about the graph, not for a reader of content.
func WithFlagSetRendering(render func(*v1beta1.FeatureFlag) Rendered) Option {
	return func(st *state) { st.renderFlagSet = render }
}

// render computes what ff serves (WithFlagSetRendering).
func (st *state) render(ff *v1beta1.FeatureFlag) *Rendered {
	if st.renderFlagSet == nil {
		return &Rendered{}
	}
	r := st.renderFlagSet(ff)
	return &r
}

// FlagSetRendered returns what a flag set serves, as rendered when the
// topology took its object.
func (v *View) FlagSetRendered(k Key) (Rendered, bool) {
	n, ok := v.state.g.node(k)
	if !ok || n.payload.flagSet == nil {
		return Rendered{}, false
	}
	return *n.payload.rendered, true
}

// RenderedOf returns the graph's rendering of ff: ok when the graph holds
// ff, or an object of its key with the same spec, as it does for the
// objects of the informer cache it was built from and their copies.
func (v *View) RenderedOf(ff *v1beta1.FeatureFlag) (Rendered, bool) {
	n, ok := v.state.g.node(FlagSetKey(ff.Namespace, ff.Name))
	if !ok || n.payload.flagSet == nil || (n.payload.flagSet != ff && !flagSpecEqual(n.payload.flagSet.Spec.FlagSpec, ff.Spec.FlagSpec)) {
		return Rendered{}, false
	}
	return *n.payload.rendered, true
}

// RenderFlagSet returns what ff serves: the graph's rendering (RenderedOf)
// or, for an object the graph has not taken (yet), one computed now with
// the topology's function (WithFlagSetRendering).
func (v *View) RenderFlagSet(ff *v1beta1.FeatureFlag) Rendered {
	if r, ok := v.RenderedOf(ff); ok {
		return r
	}
	return *v.state.render(ff)
}
