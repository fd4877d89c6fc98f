// Package confirm tells which revision of a flag set a consumer's flagd
// actually serves, from what flagd answers rather than from what flagplane
// wrote: every document flagplane serves names its FeatureFlag and
// revision in its flag-set metadata (flagsets.Serve), flagd merges that
// into each flag's metadata, and flagd's sync service hands its store's
// flags out without evaluating them (outbound.Client.FetchFlags). A flagd
// that has not read a new ConfigMap yet (the kubelet's sync), that refused
// to load it, or that reads another flag set's flags under the same keys
// answers so, and is not confirmed.
package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/outbound"
)

// Served is what one flagd serves, by flag set.
type Served struct {
	// FlagSets is, by FeatureFlag ("namespace/name", flagsets.MetadataFlagSet),
	// what flagd serves of it.
	FlagSets map[string]FlagSet
	// Unnamed counts the flags that name no FeatureFlag: another source's,
	// or a flag set flagd reads itself (the kubernetes provider).
	Unnamed int
}

// FlagSet is what a flagd serves of one flag set.
type FlagSet struct {
	// Flags is how many of its flags flagd serves.
	Flags int
	// Revisions are the revisions its flags name, sorted: one when flagd
	// holds one revision of it.
	Revisions []string
}

// Parse reads a flagd flag configuration ({"flags": {key: flag}}, as
// FetchAllFlags answers). What it does not understand is an error: an
// answer that is not flagd's confirms nothing.
func Parse(configuration []byte) (Served, error) {
	var doc struct {
		Flags map[string]struct {
			Metadata map[string]any `json:"metadata"`
		} `json:"flags"`
	}
	if err := json.Unmarshal(configuration, &doc); err != nil {
		return Served{}, errors.New("the answer is not a flagd flag configuration")
	}
	if doc.Flags == nil {
		return Served{}, errors.New("the answer is not a flagd flag configuration: it has no flags object")
	}
	s := Served{FlagSets: map[string]FlagSet{}}
	for _, f := range doc.Flags {
		name, _ := f.Metadata[flagsets.MetadataFlagSet].(string)
		revision, _ := f.Metadata[flagsets.MetadataRevision].(string)
		if name == "" || revision == "" {
			s.Unnamed++
			continue
		}
		fs := s.FlagSets[name]
		fs.Flags++
		if i, found := slices.BinarySearch(fs.Revisions, revision); !found {
			fs.Revisions = slices.Insert(fs.Revisions, i, revision)
		}
		s.FlagSets[name] = fs
	}
	return s, nil
}

// Read asks the flagd whose sync service is at address what it serves.
func Read(ctx context.Context, c *outbound.Client, address string) (Served, error) {
	b, err := c.FetchFlags(ctx, address)
	if err != nil {
		return Served{}, err
	}
	return Parse(b)
}

// Confirm tells whether a flagd serves revision of flag set name ("namespace/name"),
// which has flags flags, and when it does not, why: the message names what
// flagd serves instead. A flag set without flags is confirmed when flagd
// serves none of it.
func (s Served) Confirm(name, revision string, flags int) (bool, string) {
	fs, ok := s.FlagSets[name]
	switch {
	case !ok && flags == 0:
		return true, ""
	case !ok:
		return false, fmt.Sprintf("flagd serves no flag of FeatureFlag %s", name)
	case len(fs.Revisions) > 1:
		return false, fmt.Sprintf("flagd serves flags of FeatureFlag %s from %d revisions", name, len(fs.Revisions))
	case fs.Revisions[0] != revision:
		return false, fmt.Sprintf("flagd serves revision %s of FeatureFlag %s", topology.ShortRevision(fs.Revisions[0]), name)
	}
	return true, ""
}

// Address is host:port of a pod's flagd sync port.
func Address(ip string, port int32) string {
	return net.JoinHostPort(ip, strconv.Itoa(int(port)))
}
