//go:build !unix

package simba_test

import "time"

// processCPU is the CPU time this process has used so far and its voluntary context switches,
// or false where the platform cannot tell (here).
func processCPU() (time.Duration, int64, bool) { return 0, 0, false }
