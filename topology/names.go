package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// FileNameMaxLength is the longest file name Linux takes (NAME_MAX): every
// component of a mount path, and every ConfigMap data key the kubelet
// writes as a file, must fit.
const FileNameMaxLength = 255

// hashLength is the length of the hash that ends a shortened name: "-" and
// 16 hex digits (64 bits of a SHA-256).
const hashLength = 17

// FitName is the name flagplane derives from a namespace and a name:
// prefix + namespace + sep + name + suffix (the plain form) when that has at
// most limit bytes, so that every name that fits stays what it always was.
// Else it is the shortened form: prefix, namespace, "-", as much of name
// (each sep in it a "-") as fits, "-" and 16 hex digits of a SHA-256 of
// "<namespace>/<name>", suffix.
//
// sep must be a character that no namespace holds ("." or "_"). Between
// prefix and suffix, every plain form holds sep and no shortened form does,
// so no shortened name is the plain name of another input; two shortened
// names are equal only when their hashes are. The shortened form ends
// alphanumeric before suffix, so it is a DNS subdomain (or a ConfigMap key,
// or a file name) wherever the plain one would have been, but for its
// length. limit must leave room for prefix, suffix, a namespace and the
// hash: the callers' limits leave more than 200 characters.
func FitName(prefix, namespace, sep, name, suffix string, limit int) string {
	plain := prefix + namespace + sep + name + suffix
	if len(plain) <= limit {
		return plain
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	body := namespace + "-" + strings.ReplaceAll(name, sep, "-")
	body = strings.TrimRight(body[:limit-len(prefix)-len(suffix)-hashLength], ".-")
	return prefix + body + "-" + hex.EncodeToString(sum[:8]) + suffix
}
