package simbahttp_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestHeldLockShowsItsTimeLeft: a lease held by Lock (no tracked election or group) is listed
// in /status's terms with its time left, as an election's is, and leaves the list at Unlock.
// Before, nothing told the handler a Lock's term, so its remaining_ms was always -1.
func TestHeldLockShowsItsTimeLeft(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	b := srv.Backend()
	h := simbahttp.New(simbahttp.Opts{Backend: b})
	c, err := simba.New(b, append(h.Options(), simba.WithTTL(3*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	h.Attach(c)
	hs := httptest.NewServer(h)
	defer hs.Close()

	held, err := c.Lock(ctx, "invoice-42")
	if err != nil {
		t.Fatal(err)
	}
	st := status(t, hs.URL)
	if len(st.Terms) != 1 || st.Terms[0].Name != "invoice-42" || st.Terms[0].Token != held.Token() {
		t.Fatalf("terms %+v, want invoice-42 with token %d", st.Terms, held.Token())
	}
	if ms := st.Terms[0].RemainingMillis; ms <= 0 || ms > 3000 {
		t.Fatalf("invoice-42's remaining_ms = %d, want its time left, within the TTL (3000)", ms)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, "the unlocked term to leave /status", 10*time.Second, func() bool { return len(status(t, hs.URL).Terms) == 0 })
}
