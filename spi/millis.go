package spi

import "time"

// MaxReplyDuration bounds any duration a backend converts from a server's reply: 2^62 ns (about
// 146 years). A record written by hand may carry an expiry centuries away; saturating keeps both
// the conversion and the engine's "time sent + time left" from overflowing.
const MaxReplyDuration = time.Duration(1 << 62)

// MaxSessionTTL is the longest TTL a Simba client opens a session with (simba.MaxTTL, 24
// hours): a lease record whose holder's expiry lies farther ahead was not written by a
// client's grant or keep-alive, and a backend's Inspect shows it unreadable
// (LeaseInfo.Unreadable).
const MaxSessionTTL = 24 * time.Hour

// Millis converts a reply's milliseconds to a Duration, saturating at ±MaxReplyDuration.
func Millis(ms int64) time.Duration {
	const maxMs = int64(MaxReplyDuration / time.Millisecond)
	switch {
	case ms > maxMs:
		return time.Duration(maxMs) * time.Millisecond
	case ms < -maxMs:
		return -time.Duration(maxMs) * time.Millisecond
	}
	return time.Duration(ms) * time.Millisecond
}
