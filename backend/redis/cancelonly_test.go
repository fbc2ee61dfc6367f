package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
)

// TestLockWithCancelOnlyContextAtABlackholedServer: a Lock, TryLock or Unlock whose ctx can
// only be cancelled (no deadline: an HTTP request's, signal.NotifyContext's) returns once it
// is cancelled while the server does not answer, as the README promises. The client runs the
// call on the caller's goroutine (the backend is spi.CutSafe) and cuts it at the caller's
// cancellation, but bounded ran a call whose ctx had a deadline (the call's timeout, one
// renewal interval: 10 s here) on that goroutine, where go-redis watches only the deadline, so
// each of these waited out the call's timeout. The calls are cancelled once the proxy has
// forwarded their request (its bytes reached the proxy) or 300 ms after they began.
func TestLockWithCancelOnlyContextAtABlackholedServer(t *testing.T) {
	noLeaks(t)
	px := faultproxy.StartTest(t, testenv.Redis(t))
	b, err := Open("redis://"+px.Addr()+"/0?read_timeout=2m", WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := simba.New(b, simba.WithTTL(30*time.Second)) // renewal and call timeout: 10 s
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	}()
	prefix := "cancelonly-" + time.Now().Format("150405.000000")
	dropKeys(t, prefix)
	held, err := c.Lock(context.Background(), prefix+".held")
	if err != nil {
		t.Fatal(err)
	}
	px.Set(faultproxy.Fault{Blackhole: true})
	defer px.Heal()
	for _, tc := range []struct {
		what string
		call func(ctx context.Context) error
	}{
		{"Lock", func(ctx context.Context) error {
			h, err := c.Lock(ctx, prefix+".lock")
			if err == nil {
				err = errors.Join(errors.New("granted at a blackholed server"), h.Unlock(context.Background()))
			}
			return err
		}},
		{"TryLock", func(ctx context.Context) error {
			h, err := c.TryLock(ctx, prefix+".try")
			if err == nil {
				err = errors.Join(errors.New("granted at a blackholed server"), h.Unlock(context.Background()))
			}
			return err
		}},
		{"Unlock", func(ctx context.Context) error { return held.Unlock(ctx) }},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tc.call(ctx) }()
		time.Sleep(300 * time.Millisecond) // the call is out (its timeout is 10 s away)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s cancelled: %v; want an error matching context.Canceled", tc.what, err)
			}
		case <-time.After(5 * time.Second): // a guard far past a prompt return, half the call timeout
			t.Fatalf("%s still waiting 5 s after its ctx was cancelled (the call timeout is 10 s)", tc.what)
		}
	}
}
