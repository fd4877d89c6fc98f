package topology

import "strings"

// String lists the keys of the delta, sorted by kind, namespace and name,
// e.g. "{configmap:shop/shop/flags featureflag:shop/flags}". For logs and
// tests.
func (d Delta) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range d.sorted(func(Key) bool { return true }) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k.String())
	}
	b.WriteByte('}')
	return b.String()
}
