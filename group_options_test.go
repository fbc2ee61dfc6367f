package simba_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/generated/wire"
)

// TestJoinGroupPartitionCountIsAnOption: a partition count out of [1, wire.MaxPartitions] is an
// invalid option, not an invalid name (issue 13: JoinGroup(…, 0) matched ErrInvalidName).
func TestJoinGroupPartitionCountIsAnOption(t *testing.T) {
	w := newWorld(t)
	c, b := w.client("a")
	for _, p := range []int{0, -1, math.MinInt, wire.MaxPartitions + 1, math.MaxInt} {
		_, err := c.JoinGroup(context.Background(), "g", p)
		if !errors.Is(err, simba.ErrInvalidOption) || errors.Is(err, simba.ErrInvalidName) {
			t.Errorf("JoinGroup(g, %d) = %v, want ErrInvalidOption (not ErrInvalidName)", p, err)
		}
	}
	// A bad name is still a name error.
	if _, err := c.JoinGroup(context.Background(), "bad name", 4); !errors.Is(err, simba.ErrInvalidName) {
		t.Errorf("JoinGroup(bad name, 4) = %v, want ErrInvalidName", err)
	}
	if n := b.Calls("Join"); n != 0 {
		t.Errorf("invalid groups reached the backend: %d joins", n)
	}
}
