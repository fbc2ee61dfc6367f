//go:build !linux && !darwin

package simba

import "time"

// bootClock is not available here: suspendClock takes a forward jump of the wall clock
// against the monotonic one for a suspend (a wall clock set forward then ends terms early, the
// safe side; a suspend during which the wall clock was also set back is not seen).
// On Windows Go's monotonic clock reads the interrupt time, which Microsoft documents as
// counting sleep (not tested on Windows here), so a sleep moves it and the wall clock alike.
var bootClock func() (time.Duration, bool)
