package tck

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// inspectSpec is LeaseBackendSpec's Inspect group, for a backend that implements both
// spi.Inspector and spi.LeaseInspector: InspectLease must show a lease exactly as Inspect lists
// it, since fence.LeaseVerifier trusts whichever of the two the backend has.
func (h *harness) inspectSpec(t *testing.T) {
	probe := h.backend(t)
	if _, ok := probe.Backend.(spi.LeaseInspector); !ok {
		t.Log("tck: the backend does not implement spi.LeaseInspector: InspectLease is not checked")
		return
	}
	if _, ok := probe.Backend.(spi.Inspector); !ok {
		t.Fatal("tck: the backend implements spi.LeaseInspector but not spi.Inspector, whose listing InspectLease must agree with")
	}
	t.Run("HeldAgrees", h.inspectHeld)
	t.Run("ReleasedAgrees", h.inspectReleased)
	t.Run("NeverAcquiredAgrees", h.inspectNeverAcquired)
	t.Run("ExpiredHolderAgrees", h.inspectExpiredHolder)
	t.Run("ClosedHolderAgrees", h.inspectClosedHolder)
	t.Run("InvalidNameIsRejected", h.inspectInvalidName)
}

// inspectLease checks that b's InspectLease of name agrees with b's Inspect, and returns what
// it read. Both are read while nothing changes the lease, so they must show the same holder,
// owner, token and RemainingUnknown; Remaining, read at its own moment, only lies within the
// TTL of the holder's session.
func (h *harness) inspectLease(t *testing.T, c *client, name string, ttl time.Duration) (spi.LeaseInfo, bool) {
	t.Helper()
	b := c.Backend
	got, found, err := b.(spi.LeaseInspector).InspectLease(ctx(t), name)
	if err != nil {
		t.Fatalf("InspectLease(%q): %v", name, err)
	}
	snap, err := b.(spi.Inspector).Inspect(ctx(t))
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	var want spi.LeaseInfo
	listed := false
	for _, l := range snap.Leases {
		if l.Name == name {
			want, listed = l, true
		}
	}
	if found != listed {
		t.Fatalf("InspectLease(%q) found = %v, but Inspect lists it: %v (%+v)", name, found, listed, want)
	}
	if !found {
		return got, false
	}
	if got.Name != want.Name || got.Holder != want.Holder || got.Owner != want.Owner || got.Token != want.Token || got.RemainingUnknown != want.RemainingUnknown {
		t.Fatalf("InspectLease(%q) = %+v, Inspect lists %+v: they must agree (but for Remaining)", name, got, want)
	}
	switch {
	case got.Holder == "" && got.Remaining != 0:
		t.Fatalf("InspectLease(%q) = %+v: a free lease has no remaining time", name, got)
	case got.Holder != "" && !got.RemainingUnknown && (got.Remaining < 0 || got.Remaining > ttl):
		t.Fatalf("InspectLease(%q) remaining = %v, want in [0, %v]", name, got.Remaining, ttl)
	}
	return got, true
}

func (h *harness) inspectHeld(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.long)
	name := h.name("inspect-held")
	tok := h.grant(t, b, s, name)
	got, found := h.inspectLease(t, b, name, h.long)
	if !found || got.Holder != s || got.Token != tok || got.Owner != h.owner() {
		t.Fatalf("InspectLease(%q) = %+v (found %v), want held by %s (owner %q) with token %d", name, got, found, s, h.owner(), tok)
	}
	// Another client, which holds nothing, reads it the same: a guard is such a client.
	other := h.backend(t)
	if got, found := h.inspectLease(t, other, name, h.long); !found || got.Holder != s || got.Token != tok {
		t.Fatalf("another client's InspectLease(%q) = %+v (found %v), want held by %s with token %d", name, got, found, s, tok)
	}
}

func (h *harness) inspectReleased(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.long)
	name := h.name("inspect-released")
	h.release(t, b, s, name, h.grant(t, b, s, name))
	if got, found := h.inspectLease(t, b, name, h.long); found && got.Holder != "" {
		t.Fatalf("InspectLease(%q) after its release = %+v, want free", name, got)
	}
}

func (h *harness) inspectNeverAcquired(t *testing.T) {
	b := h.backend(t)
	name := h.name("inspect-never")
	if got, found := h.inspectLease(t, b, name, h.long); found {
		t.Fatalf("InspectLease(%q) of a name never acquired = %+v, want not found", name, got)
	}
}

func (h *harness) inspectExpiredHolder(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.short)
	name := h.name("inspect-expired")
	h.grant(t, b, s, name)
	h.expire(t, s)
	if got, found := h.inspectLease(t, b, name, h.short); found && got.Holder == s {
		t.Fatalf("InspectLease(%q) after its holder expired = %+v, want free", name, got)
	}
}

func (h *harness) inspectClosedHolder(t *testing.T) {
	b := h.backend(t)
	s := h.open(t, b, h.long)
	name := h.name("inspect-closed")
	h.grant(t, b, s, name)
	if err := b.CloseSession(ctx(t), s); err != nil {
		t.Fatalf("CloseSession(%s): %v", s, err)
	}
	if got, found := h.inspectLease(t, b, name, h.long); found && got.Holder != "" {
		t.Fatalf("InspectLease(%q) after its holder closed = %+v, want free", name, got)
	}
}

func (h *harness) inspectInvalidName(t *testing.T) {
	b := h.backend(t).Backend.(spi.LeaseInspector)
	for _, name := range []string{"", ".", "..", strings.Repeat("n", 129), "a/b", "a b", "a\x00b", "é", "a*", "{a}"} {
		if _, _, err := b.InspectLease(ctx(t), name); !errors.Is(err, spi.ErrInvalidName) {
			t.Errorf("InspectLease(%q) error = %v, want one matching spi.ErrInvalidName", name, err)
		}
	}
}
