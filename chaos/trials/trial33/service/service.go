// Package service is trial 33's stand-in for a service team's code: a billing job that runs
// while its process leads the election "billing", and writes to a store that fences by token.
// Its tests (service_test.go) are written with simbatest from the docs alone.
package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba"
)

// Store is the resource the leader writes: it rejects a write whose token is below the highest
// it has seen (a fenced resource, as README's "Fencing your resource" asks).
type Store struct {
	mu       sync.Mutex
	highest  int64
	accepted []Write
	rejected []Write
}

// Write is one write the leader attempted.
type Write struct {
	Owner string
	Token int64
	Tick  int
}

// Put accepts w unless a greater token was seen; it reports whether it accepted.
func (s *Store) Put(w Write) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.Token < s.highest {
		s.rejected = append(s.rejected, w)
		return false
	}
	s.highest = w.Token
	s.accepted = append(s.accepted, w)
	return true
}

// Accepted returns the accepted writes, in order.
func (s *Store) Accepted() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Write(nil), s.accepted...)
}

// Rejected returns the rejected writes, in order.
func (s *Store) Rejected() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Write(nil), s.rejected...)
}

// Node is one replica of the service: a client, its election and the tokens it was elected
// with.
type Node struct {
	Owner    string
	Client   *simba.Client
	Election *simba.Election

	mu      sync.Mutex
	elected []int64
	ticks   int
}

// Start makes a node that, while it leads "billing", writes to store every period of the
// client's clock (simba.Schedule), passing its term's token.
func Start(ctx context.Context, c *simba.Client, owner string, store *Store, period time.Duration) (*Node, error) {
	n := &Node{Owner: owner, Client: c}
	e, err := c.NewElection("billing",
		simba.OnElected(func(_ context.Context, t simba.Term) {
			n.mu.Lock()
			n.elected = append(n.elected, t.Token())
			n.mu.Unlock()
		}), simba.Schedule(period, n.job(store)))
	if err != nil {
		return nil, fmt.Errorf("service: new election: %w", err)
	}
	n.Election = e
	if err := e.Start(ctx); err != nil {
		return nil, fmt.Errorf("service: start: %w", err)
	}
	return n, nil
}

// job is the leader's work: one fenced write per tick.
func (n *Node) job(store *Store) func(context.Context, simba.Term) {
	return func(_ context.Context, t simba.Term) {
		n.mu.Lock()
		n.ticks++
		tick := n.ticks
		n.mu.Unlock()
		store.Put(Write{Owner: n.Owner, Token: t.Token(), Tick: tick})
	}
}

// Elected returns the tokens the node was elected with, in order.
func (n *Node) Elected() []int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]int64(nil), n.elected...)
}
