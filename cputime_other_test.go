//go:build !unix

package simba_test

import "time"

// processCPU is the CPU time this process has used so far, or false where the platform cannot
// tell (here).
func processCPU() (time.Duration, bool) { return 0, false }
