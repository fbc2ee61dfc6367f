package connbound

import (
	"testing"
	"time"
)

// TestBound: timeout/6 at least 100 ms, the limit without a timeout or above it, doubled per
// whole round of failed attempts up to the limit.
func TestBound(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		timeout, limit time.Duration
		cut, servers   int
		want           time.Duration
	}{
		{3 * time.Second, 5 * time.Second, 0, 1, 500 * ms},
		{300 * ms, 5 * time.Second, 0, 1, 100 * ms},
		{0, 5 * time.Second, 0, 1, 5 * time.Second},
		{time.Minute, 5 * time.Second, 0, 1, 5 * time.Second},
		{3 * time.Second, 5 * time.Second, 1, 2, 500 * ms},
		{3 * time.Second, 5 * time.Second, 2, 2, time.Second},
		{3 * time.Second, 5 * time.Second, 3, 1, 4 * time.Second},
		{3 * time.Second, 5 * time.Second, 9, 1, 5 * time.Second},
	} {
		if got := Bound(c.timeout, c.limit, c.cut, c.servers); got != c.want {
			t.Errorf("Bound(%v, %v, %d, %d) = %v, want %v", c.timeout, c.limit, c.cut, c.servers, got, c.want)
		}
	}
}
