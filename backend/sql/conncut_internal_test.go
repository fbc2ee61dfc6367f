package sql

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"
)

// TestConnCutDialNoGoroutinePerDial: a dial through connCut.dial starts no goroutine of its
// own while it lasts (it started one per dial, watching for the cut), and cutAll still ends
// every dial in progress. 40 dials block in the dial they wrap; the goroutines beyond the 40
// dialers are counted: 40 more on the old code.
func TestConnCutDialNoGoroutinePerDial(t *testing.T) {
	const n = 40
	entered := make(chan struct{}, n)
	inner := func(ctx context.Context, network, addr string) (net.Conn, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	k := &connCut{conns: make(map[*boundedConn]struct{})}
	dial := k.dial(inner)
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := dial(context.Background(), "tcp", "127.0.0.1:1")
			errs <- err
		}()
	}
	for range n {
		<-entered
	}
	if extra := runtime.NumGoroutine() - before - n; extra >= n/2 {
		t.Errorf("%d dials in progress run %d goroutines besides their own: one per dial", n, extra)
	}
	k.cutAll()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a dial in progress at cutAll ended with %v, want context.Canceled", err)
		}
	}
	if _, err := dial(context.Background(), "tcp", "127.0.0.1:1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a dial after cutAll: %v, want context.Canceled", err)
	}
}
