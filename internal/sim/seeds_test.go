//go:build !race

package sim

// defaultSeeds is how many seeds TestSimulate runs by default (CI) and how many the mutation
// tests may use to find a violation.
const defaultSeeds = 500
