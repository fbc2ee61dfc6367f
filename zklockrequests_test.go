package simba_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/internal/zktest"
	"github.com/simba-go/simba/spi"
)

// zkOps names the ZooKeeper opcodes a Simba client sends (the rest are shown as numbers).
var zkOps = map[int32]string{1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData",
	8: "getChildren", 9: "sync", 12: "getChildren2", 13: "check", 14: "multi", 15: "create2",
	100: "auth", 101: "setWatches", 105: "setWatches2", 106: "addWatch", -11: "closeSession"}

func zkOpName(op int32) string {
	if n, ok := zkOps[op]; ok {
		return n
	}
	return fmt.Sprint(op)
}

// zkRequests is a dialer that counts, by kind, the requests its connections send to the
// server: what the server sees, as a counting proxy between client and server would. A
// multi-op is counted with its parts ("multi[create,create,delete]"); go-zookeeper's pings,
// which the backend drops, never reach it.
type zkRequests struct {
	mu    sync.Mutex
	n     map[string]int
	dials atomic.Int64
}

func newZKRequests() *zkRequests { return &zkRequests{n: map[string]int{}} }

func (r *zkRequests) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	r.dials.Add(1)
	return &zkRequestConn{Conn: c, r: r}, nil
}

// take returns the counts since the last take and starts again.
func (r *zkRequests) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.n = map[string]int{}
	return n
}

type zkRequestConn struct {
	net.Conn
	r      *zkRequests
	out    []byte // a partial frame
	framed bool   // the connect request (the first frame, without a request header) is out
}

// Write counts the complete request frames in p (jute framing: a 4-byte length, then the
// request header xid, opcode and the body) and passes p on.
func (c *zkRequestConn) Write(p []byte) (int, error) {
	c.out = append(c.out, p...)
	for len(c.out) >= 4 {
		n := int(binary.BigEndian.Uint32(c.out))
		if len(c.out) < 4+n {
			break
		}
		f := c.out[4 : 4+n]
		c.out = c.out[4+n:]
		if !c.framed {
			c.framed = true
			continue // the connect request
		}
		if len(f) < 8 {
			continue
		}
		kind := zkOpName(int32(binary.BigEndian.Uint32(f[4:])))
		if kind == "multi" {
			kind = "multi[" + strings.Join(multiParts(f[8:]), ",") + "]"
		}
		c.r.mu.Lock()
		c.r.n[kind]++
		c.r.mu.Unlock()
	}
	return c.Conn.Write(p)
}

// multiParts returns the operations of a multi-op request body: each part is a header (type
// int32, done bool, err int32) and the operation's record; a header with done set ends it.
func multiParts(b []byte) []string {
	var parts []string
	str := func() bool { // a string or buffer: int32 length (-1: none), then the bytes
		if len(b) < 4 {
			return false
		}
		n := int(int32(binary.BigEndian.Uint32(b)))
		b = b[4:]
		if n > 0 {
			if n > len(b) {
				return false
			}
			b = b[n:]
		}
		return true
	}
	skip := func(n int) bool {
		if n > len(b) {
			return false
		}
		b = b[n:]
		return true
	}
	for len(b) >= 9 {
		op, done := int32(binary.BigEndian.Uint32(b)), b[4] != 0
		b = b[9:]
		if done {
			return parts
		}
		parts = append(parts, zkOpName(op))
		ok := true
		switch op {
		case 1, 15: // create: path, data, ACLs (perms, scheme, id), flags
			ok = str() && str() && len(b) >= 4
			if ok {
				acls := int(int32(binary.BigEndian.Uint32(b)))
				b = b[4:]
				for i := 0; i < acls && ok; i++ {
					ok = skip(4) && str() && str()
				}
				ok = ok && skip(4)
			}
		case 2, 13: // delete, check: path, version
			ok = str() && skip(4)
		case 5: // setData: path, data, version
			ok = str() && str() && skip(4)
		default:
			return append(parts, "?")
		}
		if !ok {
			return append(parts, "?")
		}
	}
	return parts
}

// zkLockCycleRequests is what the server is sent for one uncontended acquire and release of
// a name no session waits for, whether through the SPI or the public Lock and Unlock: the
// acquire's multi-op creates the lease node and, as the name has no waiter queue node, creates
// and deletes that (which succeeds only while it does not exist: the check that no one
// waits); the release's multi-op writes the lease node (which only its own session's
// identity may) and deletes it. Nothing else: no read, no watch, no sync, and nothing on a
// second (hint) connection.
var zkLockCycleRequests = map[string]int{
	"multi[create,create,delete]": 1,
	"multi[setData,delete]":       1,
}

// TestZooKeeperLockCycleRequests counts the requests the ZooKeeper server is sent per
// uncontended Lock and Unlock (a count, not a time), with a context.Background and with a
// context that has a deadline (as the bench harness passes), and per SPI Acquire and Release
// on another backend in the same run: the public Lock costs the server exactly what the
// backend's own cycle does, two multi-ops (zkLockCycleRequests), and opens no connection.
// What a keep-alive sends (one exists of the session's node, every renewal interval) is
// allowed for each keep-alive the client made meanwhile.
func TestZooKeeperLockCycleRequests(t *testing.T) {
	dsn := zktest.New(t, testenv.ZooKeeper(t), "simba-test-lockrequests").DSN("", "")
	const cycles = 20
	ctx := context.Background()

	// The SPI cycle, on a backend of its own.
	spiReqs := newZKRequests()
	raw, err := zookeeper.New(dsn, zookeeper.WithDialer(spiReqs.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	sess, err := raw.OpenSession(ctx, "spi", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	spiCycle := func() {
		a, err := raw.Acquire(ctx, sess.ID, "spi-cycle")
		if err != nil || a.Kind != spi.Granted {
			t.Fatalf("Acquire = %+v, %v", a, err)
		}
		if err := raw.Release(ctx, sess.ID, "spi-cycle", a.Token); err != nil {
			t.Fatal(err)
		}
	}
	spiCycle() // the roots
	spiReqs.take()
	for range cycles {
		spiCycle()
	}
	checkZKCycleRequests(t, "SPI Acquire + Release", spiReqs.take(), cycles, 0)

	// The public Lock and Unlock, on a client of a backend of its own (with a hint reader, as
	// every client of a ZooKeeper backend has).
	lockReqs := newZKRequests()
	be, err := zookeeper.New(dsn, zookeeper.WithDialer(lockReqs.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	var keepAlives atomic.Int64
	c, err := simba.New(be, simba.WithTTL(time.Minute), simba.WithCallObserver(func(ci simba.CallInfo) {
		if ci.Op == simba.OpKeepAlive {
			keepAlives.Add(1)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, kind := range []string{"background", "deadline"} {
		lctx := ctx
		if kind == "deadline" {
			var cancel context.CancelFunc
			lctx, cancel = context.WithTimeout(ctx, time.Hour)
			defer cancel()
		}
		lockCycle := func() {
			h, err := c.Lock(lctx, "lock-cycle")
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Unlock(lctx); err != nil {
				t.Fatal(err)
			}
		}
		lockCycle() // the session (and the roots)
		dials := lockReqs.dials.Load()
		lockReqs.take()
		ka := keepAlives.Load()
		for range cycles {
			lockCycle()
		}
		got := lockReqs.take()
		checkZKCycleRequests(t, "Lock + Unlock ("+kind+")", got, cycles, int(keepAlives.Load()-ka))
		if d := lockReqs.dials.Load() - dials; d != 0 {
			t.Errorf("Lock + Unlock (%s): %d connections opened during %d uncontended cycles, want none (no hint connection without a wait)", kind, d, cycles)
		}
	}
}

// checkZKCycleRequests checks that got, the requests of cycles cycles, are cycles times
// zkLockCycleRequests, plus at most one exists for each of keepAlives keep-alives.
func checkZKCycleRequests(t *testing.T, what string, got map[string]int, cycles, keepAlives int) {
	t.Helper()
	want := map[string]int{}
	for k, n := range zkLockCycleRequests {
		want[k] = n * cycles
	}
	if n := got["exists"]; n > 0 && n <= keepAlives {
		delete(got, "exists") // the keep-alives'
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: the server was sent %s for %d cycles, want %s (%d keep-alives meanwhile)", what, showRequests(got), cycles, showRequests(want), keepAlives)
	}
	t.Logf("%s: %s for %d cycles", what, showRequests(got), cycles)
}

func showRequests(m map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return "{" + strings.Join(out, ", ") + "}"
}
