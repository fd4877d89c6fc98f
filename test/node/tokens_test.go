package node

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestTokenRefreshAt80PercentOfItsLife(t *testing.T) {
	g := NewWithT(t)
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.Expect(token{issued: issued, expires: issued.Add(10 * time.Minute)}.refreshAt()).To(Equal(issued.Add(8 * time.Minute)))
	// A token the API server extended to a year is still replaced daily.
	g.Expect(token{issued: issued, expires: issued.Add(365 * 24 * time.Hour)}.refreshAt()).To(Equal(issued.Add(24 * time.Hour)))
}
