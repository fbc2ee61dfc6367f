//go:build race

package sim

// defaultSeeds under the race detector: the same 500 seeds CI needs (the simulator is single
// goroutine per seed, so the detector slows it without finding anything new; see doc.go).
const defaultSeeds = 500
