package zookeeper

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/testenv"
)

// TestRefusedTTLIsObservableWithoutLogSpam: a client whose TTL the server refuses for good
// (longer than its maxSessionTimeout; New cannot know, it makes no call) fails its Lock with
// that ErrInvalidOption, reports it through Client.Err and an event per refused open, and keeps
// re-opening about once per renewal interval (it heals once the server's configuration does);
// but the log has one ERROR line for it, not one per refused open as before.
func TestRefusedTTLIsObservableWithoutLogSpam(t *testing.T) {
	b := openBackend(t, serverDSN(t, ""))
	_, hi := ttlBounds(t, b)
	ttl := hi + time.Second // without the tickTime option the backend asks for the TTL itself
	// The refused open is retried once per 0.5 to 1 BackoffMax, the renewal interval: 1 s
	// here, whatever the server's maximum (60 s on .ci/zoo.cfg's server).
	var logs testenv.LogBuffer
	var refused atomic.Int32
	c, err := simba.New(b, simba.WithTTL(ttl), simba.WithRenewEvery(time.Second), simba.WithOwner("refused-ttl"), simba.WithLogger(logs.Logger()),
		simba.WithListener(func(ev simba.Event) {
			if ev.Kind == simba.EventBackendError && ev.Op == simba.OpOpenSession && errors.Is(ev.Err, simba.ErrInvalidOption) {
				refused.Add(1)
			}
		}))
	if err != nil {
		t.Fatalf("New with TTL %v: %v (the server refuses it only when asked)", ttl, err)
	}
	ctx := testCtx(t)
	t.Cleanup(func() {
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if _, err := c.Lock(ctx, "refused-ttl"); !errors.Is(err, simba.ErrInvalidOption) || !strings.Contains(err.Error(), "maxSessionTimeout") {
		t.Fatalf("Lock = %v; want the ErrInvalidOption naming maxSessionTimeout", err)
	}
	const opens = 4
	for refused.Load() < opens {
		select {
		case <-ctx.Done():
			t.Fatalf("%d refused opens reported before the test's deadline, want %d (the client stopped re-opening)", refused.Load(), opens)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := c.Err(); !errors.Is(err, simba.ErrInvalidOption) {
		t.Errorf("Client.Err = %v; want the refusal", err)
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, "op="+simba.OpOpenSession+" ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Errorf("%d ERROR lines after %d refused opens (under a minute), want 1:\n%s", len(lines), refused.Load(), strings.Join(lines, "\n"))
	}
}
