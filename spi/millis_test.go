package spi

import (
	"math"
	"testing"
	"time"
)

func TestMillisSaturates(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, 0},
		{1500, 1500 * time.Millisecond},
		{-20, -20 * time.Millisecond},
		{math.MaxInt64, MaxReplyDuration / time.Millisecond * time.Millisecond},
		{math.MinInt64, -(MaxReplyDuration / time.Millisecond * time.Millisecond)},
		{int64(MaxReplyDuration/time.Millisecond) + 1, MaxReplyDuration / time.Millisecond * time.Millisecond},
	} {
		if got := Millis(c.ms); got != c.want {
			t.Errorf("Millis(%d) = %v, want %v", c.ms, got, c.want)
		}
	}
}
