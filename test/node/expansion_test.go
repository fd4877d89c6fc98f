package node

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"PORT": "8013", "HOST": "localhost", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"":                    "",
		"plain":               "plain",
		"$(HOST):$(PORT)":     "localhost:8013",
		"$(MISSING)":          "$(MISSING)",
		"$$(PORT)":            "$(PORT)",
		"$$":                  "$",
		"a$b":                 "a$b",
		"$(EMPTY)x":           "x",
		"$(PORT":              "$(PORT",
		"$()":                 "$()",
		"trailing$":           "trailing$",
		`{"uri":"h:$(PORT)"}`: `{"uri":"h:8013"}`,
	} {
		NewWithT(t).Expect(expand(in, lookup)).To(Equal(want), "expanding %q", in)
	}
}
