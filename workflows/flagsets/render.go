package flagsets

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Render returns the flagd JSON document of a flag set: its flags,
// $evaluators and metadata. encoding/json sorts map keys, so equal flag sets
// render to equal bytes. It is what the generated ConfigMaps hold and what
// the sync server serves.
func Render(ff *v1beta1.FeatureFlag) (string, error) {
	spec := ff.Spec.FlagSpec
	if spec.Flags == nil {
		// flagd requires the flags object even when it is empty.
		spec.Flags = map[string]v1beta1.Flag{}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("rendering flag set %s/%s: %w", ff.Namespace, ff.Name, err)
	}
	return string(b), nil
}

// RevisionBytes is how many bytes of the SHA-256 of a rendering its
// revision keeps: 128 bits, 32 hex digits (topology.ShortRevision shows
// the first 12 of them).
const RevisionBytes = 16

// Revision is the content hash of a flag set's flagd document (Render): the
// content of its generated ConfigMaps once they are up to date. It names
// the content in status, in history and in rollout plans, so it must tell
// any two contents apart: 128 bits of SHA-256 (see topology.SameRevision
// for the 48-bit revisions of earlier versions).
func Revision(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:RevisionBytes])
}
