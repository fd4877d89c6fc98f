package history

import (
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flagplane/flagplane/topology"
)

// RevisionName is the name of revision number of a flag set:
// "<flag set>-<number>" when it fits a DNS subdomain (253 characters),
// else as much of the flag set's name as fits, "-", 16 hex digits of a hash
// of the name, and "-<number>" (topology.FitName, given the flag set's
// name where a namespace goes and no name of its own, so that the number
// always ends it).
func RevisionName(flagSet string, number int64) string {
	return topology.FitName("", flagSet, "", "", "-"+strconv.FormatInt(number, 10), validation.DNS1123SubdomainMaxLength)
}

// FlagSetLabelValue is the value of FlagSetLabel on a flag set's
// revisions: its name when it fits a label value (63 characters), else as
// much of it as fits, "-" and 16 hex digits of a hash of it. The label
// selects a flag set's history (kubectl get ffrev -l ...); spec.flagSet
// holds the whole name.
func FlagSetLabelValue(flagSet string) string {
	return topology.FitName("", flagSet, "", "", "", validation.LabelValueMaxLength)
}
