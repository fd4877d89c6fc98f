package node

import "strings"

// expand replaces the $(VAR) references of s with the values mapping
// knows, as the kubelet does in env values, command and args: "$$" is an
// escaped "$", and a reference to an unknown variable is left as it is.
func expand(s string, mapping func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:]) // unterminated: kept
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := mapping(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
