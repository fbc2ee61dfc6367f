package simbatest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

func TestLinkCutHangsCallsAndDropsHints(t *testing.T) {
	srv := simbatest.NewServer()
	link := simbatest.NewLink(srv.Backend())
	b := link.Backend()
	if _, ok := b.(spi.Hinter); !ok {
		t.Fatal("a link to a backend with hints must offer hints")
	}
	ctx := context.Background()
	s, err := b.OpenSession(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	hints, err := b.(spi.Hinter).Hints(hctx)
	if err != nil {
		t.Fatal(err)
	}

	link.CutOff()
	if !link.IsCut() {
		t.Fatal("IsCut after CutOff")
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(short, s.ID, "x"); !errors.Is(err, simbatest.ErrLinkCut) || !errors.Is(err, spi.ErrUnavailable) {
		t.Fatalf("Acquire while cut: %v, want a retryable ErrLinkCut", err)
	}
	if l, _ := srv.Lease("x"); l.Holder != "" {
		t.Fatal("a call over a cut link reached the server")
	}
	// A release by another client is not hinted over the cut link.
	other := srv.Backend()
	os, _ := other.OpenSession(ctx, "b", time.Minute)
	g, _ := other.Acquire(ctx, os.ID, "y")
	_ = other.Release(ctx, os.ID, "y", g.Token)
	select {
	case h := <-hints:
		t.Fatalf("hint %v got through a cut link", h)
	case <-time.After(20 * time.Millisecond):
	}

	link.Restore()
	if r, err := b.Acquire(ctx, s.ID, "x"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire after Restore: %+v %v", r, err)
	}
	_ = other.Release(ctx, os.ID, "y", g.Token) // nothing to release: no hint
	g2, _ := other.Acquire(ctx, os.ID, "z")
	_ = other.Release(ctx, os.ID, "z", g2.Token)
	select {
	case h := <-hints:
		if h.Name != "z" {
			t.Fatalf("hint %v, want the release of z", h)
		}
	case <-time.After(10 * time.Second): // a deadline for a lost hint, not a latency bound
		t.Fatal("no hint within 10 s after Restore")
	}
}

func TestLinkWithoutHints(t *testing.T) {
	srv := simbatest.NewServer()
	var plain spi.Backend = noHints{srv.Backend()}
	if _, ok := simbatest.NewLink(plain).Backend().(spi.Hinter); ok {
		t.Fatal("a link to a backend without hints must not offer hints")
	}
}

// noHints hides the Hinter of a backend.
type noHints struct{ spi.Backend }
