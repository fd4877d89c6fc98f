package workflows

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The message of an invalid object reads as an aggregate of its errors,
// and names at most maxInvalid of them, each cut to maxInvalidBytes.
func TestInvalidMessage(t *testing.T) {
	g := NewWithT(t)
	p := field.NewPath("spec", "labels")
	one := field.ErrorList{field.Invalid(p.Key("a b"), "a b", "bad")}
	g.Expect(InvalidMessage(one)).To(Equal(one.ToAggregate().Error()))
	two := field.ErrorList{one[0], field.Required(p.Key("c"), "needed"), one[0]}
	g.Expect(InvalidMessage(two)).To(Equal(two.ToAggregate().Error()), "the same wording, repeats dropped")
	g.Expect(InvalidMessage(nil)).To(BeEmpty())

	var many field.ErrorList
	long := strings.Repeat("v", 100<<10)
	for i := range 20000 {
		many = append(many, field.Invalid(p.Key(fmt.Sprintf("bad key %d", i)), long, "bad"))
	}
	msg := InvalidMessage(many)
	g.Expect(msg).To(HavePrefix(`[spec.labels[bad key 0]: Invalid value: "vvvv`))
	g.Expect(msg).To(HaveSuffix(`..., and 19990 more]`))
	g.Expect(len(msg)).To(BeNumerically("<", maxInvalid*(maxInvalidBytes+5)+30), "a condition's message holds 32768")
}

func TestCut(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Cut("short", 10)).To(Equal("short"))
	g.Expect(Cut("ééé", 3)).To(Equal("é..."), "at a rune boundary")
}
