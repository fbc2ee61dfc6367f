package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// TestOpenSessionAtARefusingServerFailsAtOnce: at an address where nothing listens (every dial
// refused), OpenSession fails with a retryable error naming the refused connection as soon as
// the dial to each server has failed, before its context ends. Its first request stayed queued
// (the pacer's) for up to the session timeout, so a client (simba lock at a ZooKeeper that is
// down) heard of the outage only at the call's timeout, 5 s by default.
func TestOpenSessionAtARefusingServerFailsAtOnce(t *testing.T) {
	b, err := New(fmt.Sprintf("zk://127.0.0.1:%d/simba-refused", freePort(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The context ends before the session timeout, as a client's call does (at a third of it).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = b.OpenSession(ctx, "refused", 40*time.Second)
	t.Logf("OpenSession failed after %v: %v", time.Since(start), err)
	if ctx.Err() != nil || !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("OpenSession at a refusing address: %v (context: %v), want a retryable error naming the refused connection before the context ends", err, ctx.Err())
	}
}

// TestOpenSessionErrorNamesTheBackend: a failed OpenSession says it is ZooKeeper's, as every
// other call of the backend and the other backends' opens do ("redis open session", "sql
// postgres open session"); a client's log line and simba status said only "backend
// unavailable: open session: zk: …".
func TestOpenSessionErrorNamesTheBackend(t *testing.T) {
	b, err := New(fmt.Sprintf("zk://127.0.0.1:%d/simba-refused", freePort(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = b.OpenSession(ctx, "refused", 40*time.Second)
	if !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(err.Error(), "zookeeper: open session: ") {
		t.Fatalf("OpenSession at a refusing address: %v, want a retryable error saying \"zookeeper: open session: \"", err)
	}
}

// TestOpenSessionAtAClosingServerFailsAtOnce: at a server that takes each connection and closes
// it before answering the connect request (one out of its quorum, or a proxy in front of a
// server that is down), OpenSession fails as at a refusing one: with a retryable error naming
// the server and the close, before its context ends. It waited for the context (10 s from
// simba status, whose context has no deadline: Config.Timeout), ending with "context deadline
// exceeded".
func TestOpenSessionAtAClosingServerFailsAtOnce(t *testing.T) {
	addr := testenv.Serve(t, testenv.Listen(t), func(c net.Conn) { c.Close() }).Addr().String()
	b, err := New("zk://" + addr + "/simba-closing")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = b.OpenSession(ctx, "closing", 40*time.Second)
	want := addr + " closed the connection before answering the connect request"
	if ctx.Err() != nil || !errors.Is(err, spi.ErrUnavailable) || !strings.Contains(err.Error(), want) {
		t.Fatalf("OpenSession at a closing server: %v (context: %v), want a retryable error saying %q before the context ends", err, ctx.Err(), want)
	}
}
