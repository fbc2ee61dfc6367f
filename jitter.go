package simba

import (
	"time"

	"github.com/simba-go/simba/internal/engine"
)

// The jitter of a step is not the next draw of one random stream: events that reach the loop
// at one instant of a virtual clock (two calls timing out together, a timer and a reply) come
// in either order, and a stream would hand them each other's draws, so that a test with
// WithSeed took another course from run to run. Each draw is instead a hash of the client's
// seed, what the draw is for (the event's kind, request, operation, timer and name), and the
// clock's reading: the same event at the same instant gets the same jitter in every run,
// whatever else is stepped around it. With a random seed the draws are as unpredictable as a
// stream's, and distinct clients' draws are independent.

// jitterProbe keys the draw of a probe's delay apart from every event's.
const jitterProbe = 0xff

// eventJitter is ev's jitter in [0, 1) at now (loop goroutine).
func (c *Client) eventJitter(ev *engine.Event, now time.Duration) float64 {
	h := mix64(uint64(ev.Req)<<8 | uint64(ev.Kind))
	h = mix64(h ^ uint64(ev.Op)<<8 ^ uint64(ev.Timer.Kind)<<16 ^ uint64(ev.Hint.Kind)<<24 ^ uint64(ev.Future)<<32)
	h = mix64(h ^ strHash(ev.Name))
	h = mix64(h ^ strHash(ev.Timer.Name))
	h = mix64(h ^ strHash(ev.Hint.Name))
	return c.draw(uint64(ev.Kind), h, 0, now)
}

// draw returns a value in [0, 1) that is a hash of the client's seed, kind, a and b and now.
func (c *Client) draw(kind, a, b uint64, now time.Duration) float64 {
	h := mix64(c.seed ^ 0x9E3779B97F4A7C15)
	h = mix64(h ^ kind)
	h = mix64(h ^ a)
	h = mix64(h ^ b)
	h = mix64(h ^ uint64(now))
	return float64(h>>11) / (1 << 53)
}

// mix64 is splitmix64's finaliser: a bijection whose output bits each depend on every input bit.
func mix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// strHash is FNV-1a 64 of s, without allocating.
func strHash(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return h
}
