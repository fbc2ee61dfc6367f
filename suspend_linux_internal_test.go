//go:build linux

package simba

import (
	"testing"
	"time"
)

// TestBootClockIsRead: on Linux the default clock has CLOCK_BOOTTIME to tell a suspend from a
// wall clock set, and on a machine that does not sleep during the test it counts no suspend.
func TestBootClockIsRead(t *testing.T) {
	b1, ok := bootClock()
	if !ok {
		t.Fatal("CLOCK_BOOTTIME not readable")
	}
	sc := newSuspendClock()
	if sc.boot == nil {
		t.Fatal("the default clock has no boot clock on Linux")
	}
	// Force a check with the real clocks: no suspend between them.
	mono, wall := sc.readNow()
	sc.check(wall - mono + time.Hour)
	if b2, _ := bootClock(); b2 < b1 || sc.suspended() != 0 {
		t.Fatalf("boot time %v then %v, %v suspended: want it steady and none", b1, b2, sc.suspended())
	}
}
