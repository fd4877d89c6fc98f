package topology

import (
	"fmt"

	"github.com/flagplane/flagplane/api/v1beta1"
)

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
	// Size is the length of Content in bytes, counted as the API server
	// counts a ConfigMap's data: it adds up the bytes of the values of
	// data and binaryData, not of the keys (ConfigMapMaxBytes). The
	// generated ConfigMap holds Content as its one value, so Size is what
	// that limit judges; every reader (the ConfigMap and status
	// workflows, admission) takes this figure.
	Size int
}

// Valid tells whether the flag set can be served.
func (r Rendered) Valid() bool { return r.Err == nil }

// The limits of the delivery modes on a flag set's rendering. A flag set
// over the limit of the provider that a source delivers it with never
// reaches that source's workloads: admission refuses or warns
// (webhooks), status says so (reason FlagSetTooLarge), and the workloads
// keep the last content that fitted.
const (
	// ConfigMapMaxBytes is the most a ConfigMap's data may hold, the file
	// provider's limit: the API server refuses (422 Invalid, "Too long:
	// may not be more than 1048576 bytes") a ConfigMap whose data and
	// binaryData values add up to more bytes than this. The keys do not
	// count, nor does the rest of the object. (Kubernetes' core
	// validation, ValidateConfigMap, against core.MaxSecretSize.)
	ConfigMapMaxBytes = 1 << 20
	// SyncMaxMessageBytes is the largest message flagd's gRPC sync client
	// takes, the limit of provider flagd-proxy: gRPC-Go's default receive
	// limit, which flagd raises only for a --sources entry with
	// maxMsgSize, and flagplane writes none. The sync server sends one
	// flag set per message (SyncMessageSize), and its own send limit,
	// --sync-max-message-size, defaults to the same.
	SyncMaxMessageBytes = 4 << 20
)

// SyncMessageSize is the size of the message that carries the flag set on
// a stream of the sync server: flagd.sync.v1's SyncFlagsResponse with
// Content as its field 1, flag_configuration (its tag, the length as a
// varint, the bytes), and nothing else. A FetchAllFlagsResponse is as
// large. (syncserver's TestSyncMessageSize holds it to the encoder's.)
func (r Rendered) SyncMessageSize() int {
	n := len(r.Content)
	if n == 0 {
		return 0 // proto3 leaves an empty string out
	}
	varint := 1
	for v := n; v >= 0x80; v >>= 7 {
		varint++
	}
	return 1 + varint + n
}

// Overflow says that a flag set's rendering is larger than a delivery mode
// carries.
type Overflow struct {
	// Provider is the delivery mode: file or flagd-proxy.
	Provider v1beta1.SyncProviderType
	// Size is the rendering's size as the limit counts it (Size, or
	// SyncMessageSize), Limit the most the provider carries.
	Size, Limit int
}

// Overflow tells whether provider cannot carry r, and by how much. The
// file provider carries at most ConfigMapMaxBytes of Size, flagd-proxy at
// most SyncMaxMessageBytes of SyncMessageSize. The kubernetes provider
// has no limit of its own: flagd reads the FeatureFlag, which the API
// server has stored already. A flag set that is not served (invalid,
// unrendered) overflows nothing.
func (r Rendered) Overflow(provider string) (Overflow, bool) {
	if r.Content == "" || !r.Valid() {
		// Not served at all: its consumers keep the last valid content,
		// and status says it is invalid.
		return Overflow{}, false
	}
	switch v1beta1.SyncProviderType(provider) {
	case v1beta1.SyncProviderFile:
		return Overflow{Provider: v1beta1.SyncProviderFile, Size: r.Size, Limit: ConfigMapMaxBytes}, r.Size > ConfigMapMaxBytes
	case v1beta1.SyncProviderFlagdProxy:
		n := r.SyncMessageSize()
		return Overflow{Provider: v1beta1.SyncProviderFlagdProxy, Size: n, Limit: SyncMaxMessageBytes}, n > SyncMaxMessageBytes
	}
	return Overflow{}, false
}

// Message says which flag set is too large for what, its size, the limit
// and what to do, in the words of status, Events and admission alike.
func (o Overflow) Message(flagSet Key) string {
	switch o.Provider {
	case v1beta1.SyncProviderFile:
		return fmt.Sprintf("flag set %s/%s is %d bytes rendered for flagd, more than the %d bytes (1 MiB) the API server lets a ConfigMap hold: "+
			"the file provider cannot deliver it; deliver it with provider flagd-proxy (the sync server, up to %d bytes) or kubernetes, or split it into smaller FeatureFlags",
			flagSet.Namespace, flagSet.Name, o.Size, o.Limit, SyncMaxMessageBytes)
	default:
		return fmt.Sprintf("flag set %s/%s is a sync message of %d bytes, more than the %d bytes (4 MiB) flagd's sync client takes: "+
			"provider %s cannot deliver it; deliver it with provider kubernetes, or split it into smaller FeatureFlags",
			flagSet.Namespace, flagSet.Name, o.Size, o.Limit, o.Provider)
	}
}

// fits is what the status of a source reads of a rendering besides its
// validity: whether each provider with a limit carries it. An edit that
// changes it names the sources that resolve the flag set, as one that
// makes it valid or invalid does.
func (r Rendered) fits() [2]bool {
	_, file := r.Overflow(string(v1beta1.SyncProviderFile))
	_, sync := r.Overflow(string(v1beta1.SyncProviderFlagdProxy))
	return [2]bool{!file, !sync}
}

// servingChanged tells whether a source reading the flag set sees a
// difference between two renderings of it: valid or not, carried by each
// provider or not.
func servingChanged(a, b *Rendered) bool {
	return a.Valid() != b.Valid() || a.fits() != b.fits()
}

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
