package etcd

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// queueFixture is a backend under a fresh prefix with a raw client to read its keys.
type queueFixture struct {
	b   *Backend
	raw *clientv3.Client
	ctx context.Context
}

func newQueueFixture(t *testing.T) *queueFixture {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &queueFixture{b: openBackend(t, serverDSN(t)), raw: rawClient(t, testenv.Etcd(t)), ctx: ctx}
}

func (f *queueFixture) open(t *testing.T, owner string) spi.SessionID {
	t.Helper()
	s, err := f.b.OpenSession(f.ctx, owner, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func (f *queueFixture) acquire(t *testing.T, q bool, id spi.SessionID, name string, want spi.AcquireKind) spi.Acquire {
	t.Helper()
	var r spi.Acquire
	var err error
	if q {
		r, err = f.b.AcquireQueued(f.ctx, id, name)
	} else {
		r, err = f.b.Acquire(f.ctx, id, name)
	}
	if err != nil || r.Kind != want {
		t.Fatalf("acquire (queued %v) by %s of %s = %+v, %v; want %s", q, id, name, r, err, want)
	}
	return r
}

// waiters returns the waiter keys of name: session id → the key's create revision and lease.
func (f *queueFixture) waiters(t *testing.T, name string) map[spi.SessionID][2]int64 {
	t.Helper()
	p := wire.EtcdQueuePrefix(f.b.Prefix(), name)
	r, err := f.raw.Get(f.ctx, p, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[spi.SessionID][2]int64{}
	for _, kv := range r.Kvs {
		out[spi.SessionID(strings.TrimPrefix(string(kv.Key), p))] = [2]int64{kv.CreateRevision, kv.Lease}
	}
	return out
}

// TestWaiterKeys: a queued acquire that finds the lease held leaves one waiter key, attached to
// the waiter's session lease; re-attempts keep its create revision (its place), also from a
// backend that does not remember the place; a plain acquire leaves none; the grant and
// Withdraw delete the key.
func TestWaiterKeys(t *testing.T) {
	f := newQueueFixture(t)
	holder, w, try := f.open(t, "holder"), f.open(t, "waiter"), f.open(t, "try")
	tok := f.acquire(t, false, holder, "n", spi.Granted).Token
	f.acquire(t, false, try, "n", spi.HeldBy)
	if got := f.waiters(t, "n"); len(got) != 0 {
		t.Fatalf("waiter keys after a plain acquire: %v, want none", got)
	}
	f.acquire(t, true, w, "n", spi.HeldBy)
	first := f.waiters(t, "n")
	lease, _ := leaseOf(w)
	if len(first) != 1 || first[w][1] != int64(lease) {
		t.Fatalf("waiter keys = %v, want one of %s on its lease %x", first, w, int64(lease))
	}
	f.acquire(t, true, w, "n", spi.HeldBy)
	other := openBackend(t, "etcd://"+strings.Join(testenv.Etcd(t), ",")+f.b.Prefix())
	if r, err := other.AcquireQueued(f.ctx, w, "n"); err != nil || r.Kind != spi.HeldBy || r.Holder != holder {
		t.Fatalf("AcquireQueued from another backend = %+v, %v; want held by %s", r, err, holder)
	}
	if got := f.waiters(t, "n"); got[w] != first[w] {
		t.Fatalf("after re-attempts the waiter key is %v, want %v (its place kept)", got[w], first[w])
	}
	if err := f.b.Release(f.ctx, holder, "n", tok); err != nil {
		t.Fatal(err)
	}
	if r := f.acquire(t, true, w, "n", spi.Granted); r.Token <= first[w][0] {
		t.Fatalf("the waiter's token %d, want above its waiter key's revision %d", r.Token, first[w][0])
	}
	if got := f.waiters(t, "n"); len(got) != 0 {
		t.Fatalf("waiter keys after the grant: %v, want none", got)
	}
	f.acquire(t, true, try, "n", spi.HeldBy)
	if err := f.b.Withdraw(f.ctx, try, "n"); err != nil {
		t.Fatal(err)
	}
	if got := f.waiters(t, "n"); len(got) != 0 {
		t.Fatalf("waiter keys after Withdraw: %v, want none", got)
	}
	if err := f.b.Withdraw(f.ctx, try, "n"); err != nil { // no entry: nothing to do
		t.Fatal(err)
	}
}

// TestOldestWaiterTakesByPlainAcquire: a free lease reserved for the caller, as the oldest
// waiter, is granted to its plain Acquire too (the grant removes its waiter key), though the
// backend answering does not remember the caller's place.
func TestOldestWaiterTakesByPlainAcquire(t *testing.T) {
	f := newQueueFixture(t)
	holder, w := f.open(t, "holder"), f.open(t, "waiter")
	tok := f.acquire(t, false, holder, "n", spi.Granted).Token
	f.acquire(t, true, w, "n", spi.HeldBy)
	if err := f.b.Release(f.ctx, holder, "n", tok); err != nil {
		t.Fatal(err)
	}
	other := openBackend(t, "etcd://"+strings.Join(testenv.Etcd(t), ",")+f.b.Prefix())
	r, err := other.Acquire(f.ctx, w, "n")
	if err != nil || r.Kind != spi.Granted || r.Token <= tok {
		t.Fatalf("the oldest waiter's plain Acquire = %+v, %v; want granted above %d", r, err, tok)
	}
	if got := f.waiters(t, "n"); len(got) != 0 {
		t.Fatalf("waiter keys after the grant: %v, want none", got)
	}
}

// TestHeadWaiterLeavingIsHinted: with the lease free and reserved for the oldest waiter, the
// next waiter learns by a Released hint when the oldest withdraws, and again when the next
// oldest's session ends (etcd deletes its waiter key with its lease), and is then granted.
// The backend subscribes to hints first, as a client does: it watches the names its sessions
// wait for, from the acquire that found the name held on, so no retry is needed.
func TestHeadWaiterLeavingIsHinted(t *testing.T) {
	f := newQueueFixture(t)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	hints, err := f.b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hinted := func(name, what string) {
		t.Helper()
		for {
			select {
			case h := <-hints:
				if h.Kind == spi.Released && h.Name == name {
					return
				}
			case <-f.ctx.Done():
				t.Fatalf("no Released hint after %s", what)
			}
		}
	}
	holder, w1, w2, w3 := f.open(t, "holder"), f.open(t, "w1"), f.open(t, "w2"), f.open(t, "w3")
	tok := f.acquire(t, false, holder, "h", spi.Granted).Token
	for _, w := range []spi.SessionID{w1, w2, w3} {
		f.acquire(t, true, w, "h", spi.HeldBy)
	}
	if err := f.b.Release(f.ctx, holder, "h", tok); err != nil {
		t.Fatal(err)
	}
	hinted("h", "the release")
	if r := f.acquire(t, true, w3, "h", spi.HeldBy); r.Holder != w1 || r.HolderOwner != "w1" || !r.RemainingUnknown {
		t.Fatalf("the last waiter's AcquireQueued = %+v, want held by the oldest, %s", r, w1)
	}
	if err := f.b.Withdraw(f.ctx, w1, "h"); err != nil {
		t.Fatal(err)
	}
	hinted("h", "the oldest waiter withdrew")
	if r := f.acquire(t, true, w3, "h", spi.HeldBy); r.Holder != w2 {
		t.Fatalf("after the withdrawal, the last waiter is held by %s, want %s", r.Holder, w2)
	}
	if err := f.b.CloseSession(f.ctx, w2); err != nil {
		t.Fatal(err)
	}
	hinted("h", "the oldest waiter's session ended")
	if r := f.acquire(t, true, w3, "h", spi.Granted); r.Token <= tok {
		t.Fatalf("token %d, want above %d", r.Token, tok)
	}
}

// TestFailedWithdrawalIsRetried: a withdrawal whose outcome is unknown (here: its context was
// already cancelled) is run again by the session's next keep-alive, so a waiter that stopped
// waiting does not keep holding a free lease back while its session lives; a queued acquire
// in between cancels the retry (the session waits again, in its place).
func TestFailedWithdrawalIsRetried(t *testing.T) {
	f := newQueueFixture(t)
	holder, w := f.open(t, "holder"), f.open(t, "waiter")
	f.acquire(t, false, holder, "n", spi.Granted)
	f.acquire(t, true, w, "n", spi.HeldBy)
	f.acquire(t, true, w, "m", spi.Granted)
	f.acquire(t, false, holder, "m2", spi.Granted)
	f.acquire(t, true, w, "m2", spi.HeldBy)
	dead, cancel := context.WithCancel(f.ctx)
	cancel()
	for _, n := range []string{"n", "m2"} {
		if err := f.b.Withdraw(dead, w, n); err == nil {
			t.Fatal("Withdraw with a cancelled context succeeded")
		}
	}
	place := f.waiters(t, "m2")[w]
	f.acquire(t, true, w, "m2", spi.HeldBy) // waits again
	if ka, err := f.b.KeepAlive(f.ctx, w, []string{"m"}, nil); err != nil || ka.Expired {
		t.Fatalf("KeepAlive = %+v, %v", ka, err)
	}
	if got := f.waiters(t, "n"); len(got) != 0 {
		t.Fatalf("waiter keys of n after the keep-alive: %v, want none (the withdrawal retried)", got)
	}
	if got := f.waiters(t, "m2"); got[w] != place {
		t.Fatalf("waiter key of m2 after the keep-alive: %v, want %v (waiting again, in its place)", got[w], place)
	}
}

// TestQueuedAcquireRoundTrips pins the round trips of the queue (spec/etcd.yaml): a queued
// acquire is one request when the lease is free and no one waits, one when it finds the lease
// held (it registers in the same transaction), one per later attempt (take); the holder's
// queued re-acquire (rare: after an acquire of unknown outcome) is two and leaves no waiter key.
func TestQueuedAcquireRoundTrips(t *testing.T) {
	var calls atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: testenv.Etcd(t), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(count)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	b, err := NewFromClient(cli, testPrefix(t))
	if err != nil {
		t.Fatal(err)
	}
	f := &queueFixture{b: b, raw: rawClient(t, testenv.Etcd(t)), ctx: context.Background()}
	holder, w := f.open(t, "holder"), f.open(t, "waiter")
	step := func(what string, want int64, fn func()) {
		t.Helper()
		before := calls.Load()
		fn()
		if got := calls.Load() - before; got != want {
			t.Errorf("%s: %d requests, want %d", what, got, want)
		}
	}
	var tok int64
	step("a queued acquire of a free lease", 1, func() { tok = f.acquire(t, true, holder, "n", spi.Granted).Token })
	step("the holder's queued re-acquire", 2, func() { f.acquire(t, true, holder, "n", spi.Granted) })
	if got := f.waiters(t, "n"); len(got) != 0 {
		t.Fatalf("waiter keys after the holder's re-acquire: %v, want none", got)
	}
	step("a queued acquire of a held lease", 1, func() { f.acquire(t, true, w, "n", spi.HeldBy) })
	step("a later attempt", 1, func() { f.acquire(t, true, w, "n", spi.HeldBy) })
	if err := f.b.Release(f.ctx, holder, "n", tok); err != nil {
		t.Fatal(err)
	}
	step("the attempt after the release", 1, func() { f.acquire(t, true, w, "n", spi.Granted) })
}

// TestReleaseRequests pins what a release sends, with a waiter whose backend watches the name
// and without: one request, a Txn of two compares on the lease key (its token and its etcd
// lease) and two deletes (the lease key and the held index key), no else branch, and nothing
// on any stream (no keep-alive, watch or revoke): BenchmarkReleaseCost times it against a Put.
func TestReleaseRequests(t *testing.T) {
	var calls atomic.Int64
	var txns []*etcdserverpb.TxnRequest
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		if r, ok := req.(*etcdserverpb.TxnRequest); ok {
			txns = append(txns, r)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	countStream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		calls.Add(1)
		return streamer(ctx, desc, cc, method, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: testenv.Etcd(t), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(count), grpc.WithStreamInterceptor(countStream)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	prefix := testPrefix(t)
	b, err := NewFromClient(cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	f := &queueFixture{b: b, raw: rawClient(t, testenv.Etcd(t)), ctx: context.Background()}
	other := openBackend(t, "etcd://"+strings.Join(testenv.Etcd(t), ",")+prefix)
	holder := f.open(t, "holder")
	w, err := other.OpenSession(f.ctx, "waiter", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, waited := range []bool{false, true} {
		tok := f.acquire(t, false, holder, "n", spi.Granted).Token
		if waited {
			if r, err := other.AcquireQueued(f.ctx, w.ID, "n"); err != nil || r.Kind != spi.HeldBy {
				t.Fatalf("the waiter's AcquireQueued = %+v, %v", r, err)
			}
		}
		before := calls.Load()
		txns = nil
		if err := b.Release(f.ctx, holder, "n", tok); err != nil {
			t.Fatal(err)
		}
		if got := calls.Load() - before; got != 1 || len(txns) != 1 {
			t.Fatalf("waited %v: a release sent %d requests (%d txns), want one txn", waited, got, len(txns))
		}
		r := txns[0]
		lk := wire.EtcdLeaseKey(prefix, "n")
		if len(r.Compare) != 2 || len(r.Success) != 2 || len(r.Failure) != 0 ||
			string(r.Compare[0].Key) != lk || string(r.Compare[1].Key) != lk ||
			string(r.Success[0].GetRequestDeleteRange().GetKey()) != lk ||
			string(r.Success[1].GetRequestDeleteRange().GetKey()) != wire.EtcdHeldKey(prefix, string(holder), "n") {
			t.Errorf("waited %v: the release's txn = %v; want two compares on %s and two deletes", waited, r, lk)
		}
		if waited {
			if r, err := other.AcquireQueued(f.ctx, w.ID, "n"); err != nil || r.Kind != spi.Granted {
				t.Fatalf("the waiter's AcquireQueued after the release = %+v, %v", r, err)
			} else if err := other.Release(f.ctx, w.ID, "n", r.Token); err != nil {
				t.Fatal(err)
			}
		}
	}
}
