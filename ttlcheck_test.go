package simba_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestNewRefusesATTLTheBackendCannotServe: a ZooKeeper DSN whose tickTime is at least half
// the client's TTL makes every session open fail with a permanent spi.ErrInvalidOption, which
// the client used to retry for as long as it ran, New having returned no error. New now asks
// the backend (spi.TTLChecker) and fails with an error that matches ErrInvalidOption and names
// the constraint and the fix; a TTL the backend can serve (the default, or one over two ticks)
// still makes a client. zookeeper.New does no I/O, and neither does the check.
func TestNewRefusesATTLTheBackendCannotServe(t *testing.T) {
	b, err := zookeeper.New("zk://127.0.0.1:2181/simba-ttlcheck?tickTime=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, ttl := range []time.Duration{3 * time.Second, 4 * time.Second} {
		c, err := simba.New(b, simba.WithTTL(ttl))
		if err == nil {
			c.Close(context.Background())
			t.Errorf("New with WithTTL(%v) on tickTime=2s: no error", ttl)
			continue
		}
		if !errors.Is(err, simba.ErrInvalidOption) {
			t.Errorf("New with WithTTL(%v): err = %v, want one matching ErrInvalidOption", ttl, err)
		}
		for _, want := range []string{"zookeeper: tickTime 2s must be less than half the ttl " + ttl.String(), "lower the DSN's tickTime or raise the TTL"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("New with WithTTL(%v): err = %q, want it to say %q", ttl, err, want)
			}
		}
	}
	for _, opts := range [][]simba.Option{nil, {simba.WithTTL(4*time.Second + time.Millisecond)}} {
		c, err := simba.New(b, opts...)
		if err != nil {
			t.Fatalf("New(%d options) on tickTime=2s: %v", len(opts), err)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// ttlRefuser is a simbatest backend whose CheckTTL refuses every TTL with an error that does
// not match ErrInvalidOption (a third-party backend's mistake).
type ttlRefuser struct{ spi.Backend }

var errNoTTL = errors.New("refuser: no TTL suits me")

func (ttlRefuser) CheckTTL(time.Duration) error { return errNoTTL }

// TestNewWrapsACheckTTLErrorAsInvalidOption: New's error for a TTL the backend refuses matches
// ErrInvalidOption even when the backend's own error does not, and still matches the latter;
// simbatest's Link forwards the check of the backend it links.
func TestNewWrapsACheckTTLErrorAsInvalidOption(t *testing.T) {
	srv := simbatest.NewServer()
	for _, b := range []spi.Backend{ttlRefuser{srv.Backend()}, simbatest.NewLink(ttlRefuser{srv.Backend()}).Backend()} {
		c, err := simba.New(b)
		if err == nil {
			c.Close(context.Background())
			t.Fatalf("New on %T: no error", b)
		}
		if !errors.Is(err, simba.ErrInvalidOption) || !errors.Is(err, errNoTTL) {
			t.Errorf("New on %T: err = %v, want one matching ErrInvalidOption and the backend's error", b, err)
		}
	}
}
