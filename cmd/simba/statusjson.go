package main

import (
	"encoding/json"
	"io"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// statusDoc is what simba status -json prints: one JSON document with what the text tables
// show, in the dialect of simbahttp's /status and its BackendSnapshot (snake_case keys, a
// holder as "session" and "owner", times left as "remaining_ms" with -1 where the backend
// cannot tell), so a tool reads both alike. (observe is a module of its own, which the CLI
// does not import: the lease, session and group objects here have BackendLease's,
// BackendSession's and BackendGroup's keys and meaning, field for field.) Strings are given as
// they are: JSON escapes what needs escaping, where the text form escapes control and format
// characters for the terminal.
type statusDoc struct {
	// Name is -name's N, Prefix -prefix's P (each absent without its flag), and Found whether
	// anything has that name or a name with that prefix (absent without either; Found false
	// goes with exit status 3).
	Name   string `json:"name,omitempty"`
	Found  *bool  `json:"found,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// Leases are the held leases (with -all the free lease records too), Sessions the sessions
	// holding them or in the groups, Groups the groups with live members, sorted by name.
	Leases   []statusLease   `json:"leases"`
	Sessions []statusSession `json:"sessions"`
	Groups   []statusGroup   `json:"groups"`
	// FreeLeases is how many of the selected lease records are free (left out of Leases
	// unless -all), as /status's free_leases.
	FreeLeases int `json:"free_leases"`
}

// statusLease is a lease record (simbahttp.BackendLease's keys): Session and Owner are empty
// for a free lease, whose RemainingMillis is 0; RemainingMillis is -1 when the backend cannot
// tell or the record is unreadable (Unreadable says why). Token is a JSON number: every token
// a backend issues is below 2^53 (README, "Fencing tokens"), so it is exact in any JSON reader.
type statusLease struct {
	Name            string          `json:"name"`
	Session         simba.SessionID `json:"session"`
	Owner           string          `json:"owner"`
	Token           int64           `json:"token"`
	RemainingMillis int64           `json:"remaining_ms"`
	Unreadable      string          `json:"unreadable,omitempty"`
}

// statusSession is a live session (simbahttp.BackendSession's keys).
type statusSession struct {
	ID              simba.SessionID `json:"id"`
	Owner           string          `json:"owner"`
	RemainingMillis int64           `json:"remaining_ms"`
	Unreadable      string          `json:"unreadable,omitempty"`
}

// statusGroup is a group with live members (simbahttp.BackendGroup's keys). A group's
// partitions are the leases N.0, N.1, … in Leases.
type statusGroup struct {
	Name    string            `json:"name"`
	Members []simba.SessionID `json:"members"`
}

// remainingMillis is d in whole milliseconds, or -1 when unknown (simbahttp's rule).
func remainingMillis(d time.Duration, unknown bool) int64 {
	if unknown {
		return -1
	}
	return max(d.Milliseconds(), 0)
}

// newStatusDoc builds the document of the snapshot snap that the filter f kept, with free the
// number of free lease records among the names f selects and found whether -name's name or
// -prefix's prefix matched anything.
func newStatusDoc(snap spi.Snapshot, f statusFilter, free int, found bool) statusDoc {
	doc := statusDoc{Name: f.name, Prefix: f.prefix, FreeLeases: free, Leases: []statusLease{},
		Sessions: []statusSession{}, Groups: []statusGroup{}}
	if f.selects() {
		doc.Found = &found
	}
	for _, l := range snap.Leases {
		unreadable := l.Unreadable != ""
		doc.Leases = append(doc.Leases, statusLease{Name: l.Name, Session: l.Holder, Owner: l.Owner, Token: l.Token,
			RemainingMillis: remainingMillis(l.Remaining, (l.RemainingUnknown && l.Holder != "") || unreadable),
			Unreadable:      l.Unreadable})
	}
	for _, s := range snap.Sessions {
		doc.Sessions = append(doc.Sessions, statusSession{ID: s.ID, Owner: s.Owner,
			RemainingMillis: remainingMillis(s.Remaining, s.RemainingUnknown || s.Unreadable != ""), Unreadable: s.Unreadable})
	}
	for _, g := range sortedGroups(snap) {
		doc.Groups = append(doc.Groups, statusGroup{Name: g, Members: append([]simba.SessionID{}, snap.Groups[g]...)})
	}
	return doc
}

// writeStatusJSON writes doc to out, indented as /status is.
func writeStatusJSON(out io.Writer, doc statusDoc) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
