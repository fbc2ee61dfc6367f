package engine

import (
	"slices"
	"strings"
	"time"

	"github.com/simba-go/simba/spi"
)

// ElectionInfo is a read-only view of one election, for invariant checkers and status pages.
type ElectionInfo struct {
	Name   string
	State  State
	Flavor Flavor
	// Token is the fencing token of the current term (Leader) or of the term whose lease a
	// Handover keeps; zero otherwise.
	Token int64
	// WorkRunning reports that the term's work has not exited (Leader, Handover).
	WorkRunning bool
	// AcquireInFlight reports an acquire in flight for the name.
	AcquireInFlight bool
	// Unknown reports that an acquire or release of the name had an unknown outcome that
	// keep-alives still ask about.
	Unknown bool
	// Group and Partition locate a partition election (Partition is -1 otherwise).
	Group     string
	Partition int
}

// GroupInfo is a read-only view of one joined group.
type GroupInfo struct {
	Name       string
	Partitions int
	Joined     bool
	Members    []spi.SessionID
	Assigned   []int
}

// Options returns the options in force: those given to New, resolved (Options.Resolve).
func (s *Engine) Options() Options { return s.opt }

// Now returns the time of the latest Step.
func (s *Engine) Now() time.Duration { return s.now }

// SessionState returns the state of the session.
func (s *Engine) SessionState() SessionState { return s.sess.state }

// SessionID returns the current session's id ("" unless live or closing).
func (s *Engine) SessionID() spi.SessionID { return s.sess.id }

// Deadline returns the current session's local deadline (meaningful while live).
func (s *Engine) Deadline() time.Duration { return s.sess.deadline }

// Closed reports whether Close has finished.
func (s *Engine) Closed() bool { return s.sess.state == SessionClosed }

// Election returns the view of the election name, if the engine has a record of it.
func (s *Engine) Election(name string) (ElectionInfo, bool) {
	e := s.elections[name]
	if e == nil {
		return ElectionInfo{}, false
	}
	return e.info(), true
}

func (e *election) info() ElectionInfo {
	in := ElectionInfo{Name: e.name, State: e.state, Flavor: e.flavor, WorkRunning: e.workRunning,
		AcquireInFlight: e.inflight != 0, Unknown: e.unknown, Partition: -1}
	if e.state == Leader || e.state == Handover {
		in.Token = e.token
	}
	if e.group != nil {
		in.Group, in.Partition = e.group.name, e.part
	}
	return in
}

// Elections returns the view of every election the engine has a record of, sorted by name.
// It allocates and visits every election: for tests and status pages, not for the hot path.
func (s *Engine) Elections() []ElectionInfo {
	out := make([]ElectionInfo, 0, len(s.elections))
	for _, e := range s.elections {
		out = append(out, e.info())
	}
	slices.SortFunc(out, func(a, b ElectionInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Group returns the view of the joined group name.
func (s *Engine) Group(name string) (GroupInfo, bool) {
	g := s.groups[name]
	if g == nil {
		return GroupInfo{}, false
	}
	return GroupInfo{Name: g.name, Partitions: g.partitions, Joined: g.joined,
		Members: slices.Clone(g.members), Assigned: slices.Clone(g.assigned)}, true
}

// Footprint counts what the engine keeps per name and per call, for tests that check that
// state returns to its size once names are let go.
type Footprint struct {
	Elections, Active, Waiting, Groups, Pending, Released, Releasing, Barriers int
}

// Footprint returns the sizes of the engine's per-name and per-call state.
func (s *Engine) Footprint() Footprint {
	return Footprint{
		Elections: len(s.elections), Active: len(s.active), Waiting: len(s.waiting),
		Groups: len(s.groups), Pending: len(s.pending), Released: len(s.sess.released),
		Releasing: len(s.sess.releasing), Barriers: len(s.barriers),
	}
}
