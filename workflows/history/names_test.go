package history

import (
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestRevisionName: "<flag set>-<number>" while it fits; a longest name
// is shortened to a DNS subdomain that still ends in its number, and two
// long names that share their first 230 characters get two names.
func TestRevisionName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(RevisionName("checkout", 1)).To(Equal("checkout-1"))
	g.Expect(RevisionName("shop.checkout-v2", 42)).To(Equal("shop.checkout-v2-42"))

	fits := strings.Repeat("a", 253-len("-7"))
	g.Expect(RevisionName(fits, 7)).To(Equal(fits+"-7"), "a name that fits is kept whole")

	long := strings.Repeat("a", 250) + ".b"
	other := strings.Repeat("a", 250) + ".c"
	for _, number := range []int64{1, 99, 1 << 40} {
		name := RevisionName(long, number)
		g.Expect(len(name)).To(BeNumerically("<=", validation.DNS1123SubdomainMaxLength), name)
		g.Expect(validation.IsDNS1123Subdomain(name)).To(BeEmpty(), name)
		g.Expect(name).To(HaveSuffix("-"+strconv.FormatInt(number, 10)), "the number ends it")
		g.Expect(RevisionName(other, number)).NotTo(Equal(name), "names that differ past the cut differ")
		g.Expect(RevisionName(long, number+1)).NotTo(Equal(name))
	}
	// A name that would end in a dot at the cut loses it.
	dotted := strings.Repeat("a", 229) + "." + strings.Repeat("b", 30)
	g.Expect(validation.IsDNS1123Subdomain(RevisionName(dotted, 3))).To(BeEmpty())
}

// TestFlagSetLabelValue: the name while it fits a label value, else a
// shortened one that is a valid label value and tells long names apart.
func TestFlagSetLabelValue(t *testing.T) {
	g := NewWithT(t)
	g.Expect(FlagSetLabelValue("checkout")).To(Equal("checkout"))
	g.Expect(FlagSetLabelValue(strings.Repeat("x", 63))).To(Equal(strings.Repeat("x", 63)))
	for _, name := range []string{strings.Repeat("x", 64), strings.Repeat("a.b-", 60) + "c", strings.Repeat("y", 253)} {
		v := FlagSetLabelValue(name)
		g.Expect(validation.IsValidLabelValue(v)).To(BeEmpty(), v)
		g.Expect(v).NotTo(Equal(FlagSetLabelValue(name + "z")))
	}
}
