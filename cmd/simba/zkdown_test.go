package main

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
)

// TestStatusAtADownZooKeeperFailsAtOnce: simba status at a ZooKeeper "server" that refuses
// connections, or takes them and closes them unanswered (a server out of its quorum, or a
// proxy in front of one that is down, as in trial 32), fails with the attempt's error naming
// the server, not at the session open's 10 s bound: run under a context of 5 s, the error is
// the refusal or the close, not the deadline. Old code, for the closing server: "open
// session: context deadline exceeded" (10.1 s from the CLI, trial 32 finding 8).
func TestStatusAtADownZooKeeperFailsAtOnce(t *testing.T) {
	closing := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) { c.Close() }).Addr().String()
	refused := testenv.RefusedAddr(t)
	for _, tc := range []struct{ name, addr, want string }{
		{"refused", refused, "dial tcp " + refused + ": connect: connection refused"},
		{"closing", closing, closing + " closed the connection before answering the connect request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := statusTo(ctx, io.Discard, []string{"-dsn", "zk://" + tc.addr})
			if err == nil {
				t.Fatal("simba status at a down ZooKeeper succeeded")
			}
			line := errorLine(err)
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				t.Fatalf("simba status waited for its deadline: %s", line)
			}
			if !strings.Contains(line, tc.want) || !strings.Contains(line, "could not connect to a server") {
				t.Errorf("simba status: %s\nwant the attempt's error: %q", line, tc.want)
			}
			if got := exitStatusOf(context.Background(), err); got != 1 {
				t.Errorf("exit status %d, want 1", got)
			}
		})
	}
}
