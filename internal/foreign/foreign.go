// Package foreign keeps records that no Simba client wrote (a hand-added group member, an entry
// of the wrong form) out of what the SQL and Redis backends report, and warns about each one
// once: such a record must never take a partition or a name from the real clients.
package foreign

import (
	"log/slog"
	"strings"
	"sync"

	"github.com/simba-go/simba/generated/wire"
)

// maxSeen bounds how many foreign records a Filter remembers having warned about; past it the
// memory is cleared (and the records still there are warned about once more).
const maxSeen = 1024

// maxShown bounds how much of a foreign record a warning quotes, in bytes.
const maxShown = 80

// Filter drops foreign group members and logs one warning per foreign record it meets. It is
// safe for concurrent use.
type Filter struct {
	log     *slog.Logger
	backend string

	mu   sync.Mutex
	seen map[string]struct{}
}

// New returns a Filter that warns on log (nil: slog.Default()), naming backend in each warning.
func New(log *slog.Logger, backend string) *Filter {
	if log == nil {
		log = slog.Default()
	}
	return &Filter{log: log, backend: backend, seen: map[string]struct{}{}}
}

// Members returns the members of group that have the form of a client session id
// (wire.IsClientSessionID), in their order, and warns once about each one dropped. When every
// member is valid it returns ids itself.
func Members[S ~string](f *Filter, group string, ids []S) []S {
	bad := 0
	for _, id := range ids {
		if !wire.IsClientSessionID(string(id)) {
			bad++
		}
	}
	if bad == 0 {
		return ids
	}
	out := make([]S, 0, len(ids)-bad)
	for _, id := range ids {
		if wire.IsClientSessionID(string(id)) {
			out = append(out, id)
			continue
		}
		f.Warn("group member is not a client session id; ignored", "group", group, "member", string(id))
	}
	return out
}

// Warn logs msg once per distinct (msg, attrs) with the backend's name and attrs, key-value
// pairs of strings (foreign values are shortened to maxShown bytes; slog's handlers quote them).
func (f *Filter) Warn(msg string, attrs ...string) {
	k := msg + "\x00" + strings.Join(attrs, "\x00")
	f.mu.Lock()
	_, dup := f.seen[k]
	if !dup {
		if len(f.seen) >= maxSeen {
			clear(f.seen)
		}
		f.seen[k] = struct{}{}
	}
	f.mu.Unlock()
	if dup {
		return
	}
	args := make([]any, len(attrs))
	for i, a := range attrs {
		if len(a) > maxShown {
			a = a[:maxShown] + "..."
		}
		args[i] = a
	}
	f.log.Warn("simba: "+f.backend+": "+msg, args...)
}
