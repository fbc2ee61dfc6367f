package main

// The stale-write measure: Kleppmann's GC-pause scenario, beside the peers. A holder process
// (this binary re-executed with -stale) takes a lock, does what its library's documentation
// recommends before a write (the check), says "about to write" and waits for the parent's
// word on stdin; the parent SIGSTOPs it there, so the pause falls between the check and the
// write. A waiter of the same library in the parent takes the lock once the holder's lease
// has run out and writes its own value to the shared resource; then the parent lets the
// holder go on (SIGCONT), and the holder writes. The resource's last value tells whether the
// stale holder's write landed after the new holder's.

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"cirello.io/pglock"
	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fenceredis"
	"github.com/simba-go/simba/fence/fencesql"
	"github.com/simba-go/simba/generated/wire"
)

// Where a stale-write row's resource lives.
const (
	resPG      = "PostgreSQL"
	resRedis   = "Redis"
	resCluster = "Redis Cluster"
	resEtcd    = "etcd"
)

// The values written to the resource: before the round, by the new holder (the waiter) and by
// the stale holder.
const (
	valInitial = "initial"
	valNew     = "new holder"
	valStale   = "stale holder"
)

// The outcomes of the stale holder's write attempt, as the holder process reports them.
const (
	outWrote   = "wrote"   // the write went through
	outLost    = "lost"    // the holder learned it had lost the lock and did not write
	outRefused = "refused" // the resource refused the write (a fence, a guarded transaction)
	outFailed  = "failed"  // any other error
)

// staleWait bounds how long the waiter may take to get the lock and write (from the stop).
func staleWait(ttl time.Duration) time.Duration { return 5*ttl + 20*time.Second }

// staleRow is one line of the stale-write table: the holder process's role (both the holder
// and the waiter use c.staleLibs()[role]), where the resource lives and what the holder does
// before and for its write, in words.
type staleRow struct {
	group, name, role, res, note string
}

// staleRes is a row's tally over the rounds.
type staleRes struct {
	Group, Name string
	// Resource is where the shared value lives; Check is what the holder checks and how it
	// writes, as the table's note says.
	Resource, Check string
	// Rounds ran to the end (the stale holder's write attempted and the resource read).
	Rounds int
	// Landed: the resource ended with the stale holder's value, after the new holder's (the
	// safety violation). Lost: the holder learned it had lost the lock and did not write.
	// Refused: the resource refused the write. Failed: another error of the write.
	Landed, Lost, Refused, Failed int
	// LastLost, LastRefusal and LastFailure are the holder's last such errors, as it reported
	// them.
	LastLost    string `json:",omitempty"`
	LastRefusal string `json:",omitempty"`
	LastFailure string `json:",omitempty"`
	// PauseTTLs is how long the holder was stopped in each round, in TTLs.
	PauseTTLs []float64 `json:"pause_ttls"`
	// Errors are rounds the harness could not run to the end (setup, the waiter, a timeout).
	Errors    int
	LastError string `json:",omitempty"`
}

// staleSample is one round of a row: the holder's outcome, whether its value is the
// resource's last, and how long it was stopped.
type staleSample struct {
	outcome, detail string
	landed          bool
	paused          time.Duration
}

// add counts s into the row's tally.
func (r *staleRes) add(s staleSample, ttl time.Duration) {
	r.Rounds++
	r.PauseTTLs = append(r.PauseTTLs, float64(s.paused)/float64(ttl))
	if s.landed {
		r.Landed++
	}
	switch s.outcome {
	case outLost:
		r.Lost++
		r.LastLost = s.detail
	case outRefused:
		r.Refused++
		r.LastRefusal = s.detail
	case outFailed:
		r.Failed++
		r.LastFailure = s.detail
	}
}

// staleOutcome classifies the stale holder's write error: a fence's or guard's refusal, the
// lock's loss learned before the write, another error, or none.
func staleOutcome(err error) string {
	switch {
	case err == nil:
		return outWrote
	case errors.Is(err, fence.ErrStaleToken), errors.Is(err, errNotOwner):
		return outRefused
	case errors.Is(err, errLockLost):
		return outLost
	}
	return outFailed
}

// errLockLost marks a write that did not run because the holder learned that its lock was
// lost (its lock's context ended); errNotOwner an etcd transaction whose IsOwner guard failed.
var (
	errLockLost = errors.New("the lock was lost before the write")
	errNotOwner = errors.New("etcd: the transaction's IsOwner guard failed (the mutex key is no longer the owner)")
)

// staleRows are the rows of the selected servers: Simba `Lock` on each Simba backend, and the
// peers.
func staleRows(c conf, sel selection) []staleRow {
	var rows []staleRow
	for _, sb := range c.simbaBackends() {
		if !sel.group(sb.group) {
			continue
		}
		r := staleRow{group: sb.group, name: rowLock, role: sb.role, res: resPG,
			note: "checks `Held.IsValid()` and the term's `Context()`; writes through `fencesql.Write` with `Held.Token()`, on its own context (as the README's example)"}
		switch sb.group {
		case "Redis", "Redis Cluster":
			r.res = sb.group
			r.note = "checks `Held.IsValid()` and the term's `Context()`; writes through `fenceredis.Set` with `Held.Token()`, on its own context (as the README's example)"
		}
		rows = append(rows, r)
	}
	if sel.group("Redis") {
		rows = append(rows,
			staleRow{group: "Redis", name: "redislock", role: "redislock", res: resRedis,
				note: "checks `Lock.TTL()` > 0 (a round trip: the key still holds its token); plain `SET` (no token to check: redislock's token is random)"},
			staleRow{group: "Redis", name: "redsync", role: "redsync", res: resRedis,
				note: "checks `Mutex.Until()` is ahead and `Mutex.ValidContext()` (a round trip); plain `SET` (redsync has no fencing token)"})
	}
	if sel.group("PostgreSQL") {
		rows = append(rows, staleRow{group: "PostgreSQL", name: rowPG, role: "pglock", res: resPG,
			note: "holds the lock in `Client.Do` (its context ends when a heartbeat finds the lock lost), checks `!Lock.IsReleased()`; plain `UPDATE` in a transaction on that context (`RecordVersionNumber` is a cyclic sequence value that changes with every heartbeat, not documented as a fencing token)"})
	}
	if sel.group("ZooKeeper") {
		rows = append(rows, staleRow{group: "ZooKeeper", name: rowZK, role: "zk", res: resPG,
			note: "nothing to check: `zk.Lock` exposes neither its state nor a token; plain `UPDATE` in a transaction"})
	}
	if sel.group(groupEtc) && c.etcdURL != "" {
		rows = append(rows, staleRow{group: groupEtc, name: "etcd `concurrency.Mutex`", role: "etcd-mutex", res: resEtcd,
			note: "checks the session's `Done()`; writes a key in the same etcd in a `Txn` guarded by `Mutex.IsOwner()` (etcd's documented way; a resource outside etcd would get no such check), on its own context"})
	}
	return rows
}

// staleLock is a lock one library's client holds in the stale-write measure: its fencing
// token (0: the library has none), the check its documentation recommends before a write
// (nil: still held), its write of the shared resource, and its release.
type staleLock struct {
	token   int64
	check   func(ctx context.Context) error
	write   func(ctx context.Context, val string) error
	release func()
}

// staleLib takes name with one library (waiting for it) and opens its client's way to the
// resource.
type staleLib func(ctx context.Context, name string) (*staleLock, error)

// staleKey is the Redis key of name's resource; it carries the fence's hash tag.
func staleKey(name string) string { return "bench:{" + name + "}:stale" }

// staleEtcdKey is the etcd key of name's resource.
func staleEtcdKey(name string) string { return "/simba-bench/stale/" + name }

// The SQL resource: one row per lock name in a table of PostgreSQL's.
const (
	staleTable  = "CREATE TABLE IF NOT EXISTS simba_bench_stale (id VARCHAR(128) PRIMARY KEY, val TEXT NOT NULL)"
	staleUpdate = "UPDATE simba_bench_stale SET val = $2 WHERE id = $1"
)

// pgWrite sets name's row to val in tx.
func pgWrite(ctx context.Context, tx *sql.Tx, name, val string) error {
	res, err := tx.ExecContext(ctx, staleUpdate, name, val)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errors.Join(fmt.Errorf("resource row %s: %d rows updated", name, n), err)
	}
	return nil
}

// plainPGWrite is the peers' SQL write: the same UPDATE in a transaction, with no token.
func plainPGWrite(ctx context.Context, db *sql.DB, name, val string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := pgWrite(ctx, tx, name, val); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// lostIf marks err as the lock's loss when lockCtx has ended (and the resource did not refuse
// the write itself).
func lostIf(lockCtx context.Context, err error) error {
	if err == nil || lockCtx.Err() == nil || errors.Is(err, fence.ErrStaleToken) || errors.Is(err, errNotOwner) {
		return err
	}
	return fmt.Errorf("%w: %w", errLockLost, err)
}

// newRedisResource is a client of the Redis (or Redis Cluster) a resource lives on.
func newRedisResource(res string) goredis.UniversalClient {
	if res == resCluster {
		return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: strings.Split(clusterAddrs, ",")})
	}
	return goredis.NewClient(&goredis.Options{Addr: redisAddr})
}

// staleLibs are the libraries of the stale-write measure, by holder role.
func (c conf) staleLibs() map[string]staleLib {
	m := map[string]staleLib{}
	for _, sb := range c.simbaBackends() {
		res := resPG
		if sb.group == "Redis" || sb.group == "Redis Cluster" {
			res = sb.group
		}
		m[sb.role] = func(ctx context.Context, name string) (*staleLock, error) {
			return simbaStaleLock(ctx, sb.open, c.ttl, res, name)
		}
	}
	m["redislock"] = func(ctx context.Context, name string) (*staleLock, error) {
		rc := goredis.NewClient(&goredis.Options{Addr: redisAddr})
		l, err := redislock.New(rc).Obtain(ctx, name, c.ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
		if err != nil {
			_ = rc.Close()
			return nil, err
		}
		stop := refresher(c.ttl, func() { _ = l.Refresh(context.Background(), c.ttl, nil) })
		return &staleLock{
			check: func(ctx context.Context) error {
				ttl, err := l.TTL(ctx)
				if err == nil && ttl <= 0 {
					err = errors.New("redislock: TTL 0, the lock is gone")
				}
				return err
			},
			write: func(ctx context.Context, val string) error { return rc.Set(ctx, staleKey(name), val, 0).Err() },
			release: func() {
				stop()
				_ = l.Release(context.Background())
				_ = rc.Close()
			},
		}, nil
	}
	m["redsync"] = func(ctx context.Context, name string) (*staleLock, error) {
		rc := goredis.NewClient(&goredis.Options{Addr: redisAddr})
		rs := redsync.New(redsyncgoredis.NewPool(rc))
		tries := int(staleWait(c.ttl)/(20*time.Millisecond)) + 1
		mu := rs.NewMutex(name, redsync.WithExpiry(c.ttl), redsync.WithTries(tries), redsync.WithRetryDelay(20*time.Millisecond))
		if err := mu.LockContext(ctx); err != nil {
			_ = rc.Close()
			return nil, err
		}
		stop := refresher(c.ttl, func() { _, _ = mu.Extend() })
		return &staleLock{
			check: func(ctx context.Context) error {
				if !time.Now().Before(mu.Until()) {
					return errors.New("redsync: past Until()")
				}
				ok, err := mu.ValidContext(ctx)
				if err == nil && !ok {
					err = errors.New("redsync: not Valid()")
				}
				return err
			},
			write: func(ctx context.Context, val string) error { return rc.Set(ctx, staleKey(name), val, 0).Err() },
			release: func() {
				stop()
				_, _ = mu.UnlockContext(context.Background())
				_ = rc.Close()
			},
		}, nil
	}
	m["pglock"] = func(ctx context.Context, name string) (*staleLock, error) {
		db, err := sql.Open("postgres", pgDSN)
		if err != nil {
			return nil, err
		}
		pc, err := pglock.New(db, pglock.WithLeaseDuration(c.ttl), pglock.WithHeartbeatFrequency(c.ttl/3), pglock.WithCustomTable("simba_bench_pglock"))
		if err != nil {
			_ = db.Close()
			return nil, err
		}
		_ = pc.TryCreateTable()
		type held struct {
			ctx context.Context
			l   *pglock.Lock
		}
		got, ended, done := make(chan held, 1), make(chan error, 1), make(chan struct{})
		dctx, cancel := context.WithCancel(context.Background())
		go func() {
			ended <- pc.Do(dctx, name, func(lctx context.Context, l *pglock.Lock) error {
				got <- held{lctx, l}
				select {
				case <-done:
				case <-lctx.Done():
					<-done
				}
				return nil
			})
		}()
		var h held
		select {
		case h = <-got:
		case err = <-ended:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			cancel()
			close(done)
			<-ended
			_ = db.Close()
			return nil, err
		}
		return &staleLock{
			check: func(context.Context) error {
				if h.l.IsReleased() || h.ctx.Err() != nil {
					return errors.New("pglock: the lock is released")
				}
				return nil
			},
			write: func(ctx context.Context, val string) error {
				wctx, stop := context.WithCancel(h.ctx)
				defer stop()
				defer context.AfterFunc(ctx, stop)()
				return lostIf(h.ctx, plainPGWrite(wctx, db, name, val))
			},
			release: func() {
				close(done)
				<-ended // Do releases the lock when its function returns
				cancel()
				_ = db.Close()
			},
		}, nil
	}
	m["zk"] = func(ctx context.Context, name string) (*staleLock, error) {
		conn, err := zkConnect(c.ttl)
		if err != nil {
			return nil, err
		}
		l := zk.NewLock(conn, "/simba-bench/"+name, zk.WorldACL(zk.PermAll))
		locked := make(chan error, 1)
		go func() { locked <- l.Lock() }() // zk.Lock takes no context
		select {
		case err = <-locked:
		case <-ctx.Done():
			conn.Close() // ends the Lock call
			<-locked
			err = ctx.Err()
		}
		if err != nil {
			conn.Close()
			return nil, err
		}
		db, err := sql.Open("postgres", pgDSN)
		if err != nil {
			conn.Close()
			return nil, err
		}
		return &staleLock{
			check: func(context.Context) error { return nil },
			write: func(ctx context.Context, val string) error { return plainPGWrite(ctx, db, name, val) },
			release: func() {
				_ = l.Unlock()
				conn.Close()
				_ = db.Close()
			},
		}, nil
	}
	m["etcd-mutex"] = func(ctx context.Context, name string) (*staleLock, error) {
		cli, _, err := etcdClient(c.etcdURL)
		if err != nil {
			return nil, err
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(c.ttl/time.Second)))
		if err != nil {
			_ = cli.Close()
			return nil, err
		}
		mu := concurrency.NewMutex(s, "/simba-bench/"+name)
		if err := mu.Lock(ctx); err != nil {
			_ = s.Close()
			_ = cli.Close()
			return nil, err
		}
		return &staleLock{
			check: func(context.Context) error {
				select {
				case <-s.Done():
					return errors.New("etcd: the session is done")
				default:
					return nil
				}
			},
			// On the caller's context: the IsOwner guard, not the session, is what stops a
			// stale write.
			write: func(ctx context.Context, val string) error {
				resp, err := cli.Txn(ctx).If(mu.IsOwner()).Then(clientv3.OpPut(staleEtcdKey(name), val)).Commit()
				if err == nil && !resp.Succeeded {
					err = errNotOwner
				}
				return err
			},
			release: func() {
				uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = mu.Unlock(uctx)
				cancel()
				_ = s.Close()
				_ = cli.Close()
			},
		}, nil
	}
	return m
}

// refresher calls f every ttl/3 until the returned stop is called.
func refresher(ttl time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

// simbaStaleLock takes name with a new Simba client of o and opens the fence of res: the
// check is Held.IsValid and the term's Context, the write goes through the fence helper with
// the held token (README, "Fencing your resource").
func simbaStaleLock(ctx context.Context, o opener, ttl time.Duration, res, name string) (*staleLock, error) {
	cl, done, err := newClient(ctx, o, ttl, nil)
	if err != nil {
		return nil, err
	}
	h, err := cl.Lock(ctx, name)
	if err != nil {
		done()
		return nil, err
	}
	var (
		fenced  func(ctx context.Context, val string) error
		closeFn func()
	)
	switch res {
	case resRedis, resCluster:
		rc := newRedisResource(res)
		f := fenceredis.New(rc)
		fenced = func(ctx context.Context, val string) error { return f.Set(ctx, name, h.Token(), staleKey(name), val) }
		closeFn = func() { _ = rc.Close() }
	default:
		db, err := sql.Open("postgres", pgDSN)
		if err == nil {
			var f *fencesql.Fence
			if f, err = fencesql.New(db, "postgres"); err == nil {
				fenced = func(ctx context.Context, val string) error {
					return f.Write(ctx, name, h.Token(), func(ctx context.Context, tx *sql.Tx) error { return pgWrite(ctx, tx, name, val) })
				}
				closeFn = func() { _ = db.Close() }
			} else {
				_ = db.Close()
			}
		}
		if err != nil {
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = h.Unlock(uctx)
			cancel()
			done()
			return nil, err
		}
	}
	return &staleLock{
		token: h.Token(),
		check: func(context.Context) error {
			if !h.IsValid() || h.Context().Err() != nil {
				return errors.New("simba: the term is no longer valid")
			}
			return nil
		},
		// The write runs on the caller's context, as in the README's example: the fence, not
		// the client, is what stops a stale write.
		write: func(ctx context.Context, val string) error { return fenced(ctx, val) },
		release: func() {
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = h.Unlock(uctx)
			cancel()
			done()
			closeFn()
		},
	}, nil
}

// runStaleHolder is the holder process of the stale-write measure: it takes name with role's
// library, runs the library's check, prints "about <token>" and waits for "go" on stdin (the
// parent stops it meanwhile); then it writes valStale and prints "result <outcome> <error>".
// It ends when stdin does, and after two minutes at most.
func runStaleHolder(role, name string) int {
	time.AfterFunc(2*time.Minute, func() { os.Exit(3) })
	c, err := confFromEnv()
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	lib, ok := c.staleLibs()[role]
	if !ok {
		fmt.Println("error: unknown role", role)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	l, err := lib(ctx, name)
	if err == nil {
		if err = l.check(ctx); err != nil {
			err = fmt.Errorf("the check failed before the pause: %w", err)
		}
	}
	cancel()
	if err != nil {
		fmt.Println("error:", oneLine(err))
		return 1
	}
	fmt.Println("about", l.token)
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		return 0 // the parent gave up
	}
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = l.write(wctx, valStale)
	cancel()
	fmt.Println("result", staleOutcome(err), oneLine(err))
	released := make(chan struct{})
	go func() { l.release(); close(released) }()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
	}
	return 0
}

// oneLine is err's text on one line ("" for nil).
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// staleChild is a holder process of the stale-write measure, seen from the parent.
type staleChild struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	lines   chan string
	eof     chan struct{}
	stopped bool
}

// startStaleChild re-executes this binary as the stale holder of role for name.
func startStaleChild(env []string, role, name string) (*staleChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-stale", role, "-name", name)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childAttr()
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &staleChild{cmd: cmd, in: in, lines: make(chan string, 8), eof: make(chan struct{})}
	go func() {
		defer close(h.eof)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case h.lines <- sc.Text():
			default: // more lines than the protocol has: dropped
			}
		}
	}()
	return h, nil
}

// line is the child's next line, within d.
func (h *staleChild) line(ctx context.Context, d time.Duration) (string, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case l := <-h.lines:
		return l, nil
	case <-h.eof:
		select {
		case l := <-h.lines:
			return l, nil
		default:
		}
		return "", errors.New("holder process: its output ended")
	case <-ctx.Done():
		return "", fmt.Errorf("holder process: %w", ctx.Err())
	case <-t.C:
		return "", fmt.Errorf("holder process: no answer after %v", d)
	}
}

// pause stops the child (SIGSTOP; see pauseProcess) and keeps track of it.
func (h *staleChild) pause() error {
	if err := pauseProcess(h.cmd.Process); err != nil {
		return err
	}
	h.stopped = true
	return nil
}

// resume lets a stopped child go on (SIGCONT; see resumeProcess).
func (h *staleChild) resume() error {
	if err := resumeProcess(h.cmd.Process); err != nil {
		return err
	}
	h.stopped = false
	return nil
}

// reap ends the child whatever state it is in: its stdin closes, a stopped child gets SIGCONT
// first, and one that has not exited 10 s later is killed; then it is waited for.
func (h *staleChild) reap() {
	_ = h.in.Close()
	if h.stopped {
		_ = h.resume()
	}
	select {
	case <-h.eof:
	case <-time.After(10 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.eof
	}
	_ = h.cmd.Wait()
}

// staleResource is the parent's access to the resources of a round: it sets a row's value
// before the round, reads it after and removes it (with its fence's record) at the end.
type staleResource struct {
	db             *sql.DB
	redis, cluster goredis.UniversalClient
	etcd           *clientv3.Client
}

// openStaleResources opens what rows need.
func openStaleResources(ctx context.Context, c conf, rows []staleRow) (*staleResource, error) {
	r := new(staleResource)
	for _, row := range rows {
		var err error
		switch row.res {
		case resPG:
			if r.db == nil {
				if r.db, err = sql.Open("postgres", pgDSN); err == nil {
					_, err = r.db.ExecContext(ctx, staleTable)
				}
				if err == nil {
					err = migratePG(ctx)
				}
			}
		case resRedis:
			if r.redis == nil {
				r.redis = newRedisResource(resRedis)
			}
		case resCluster:
			if r.cluster == nil {
				r.cluster = newRedisResource(resCluster)
			}
		case resEtcd:
			if r.etcd == nil {
				r.etcd, _, err = etcdClient(c.etcdURL)
			}
		}
		if err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

// migratePG applies Simba's migrations to PostgreSQL (the fence's table simba_fence among
// them), as a run that selects no PostgreSQL row of Simba's still fences there.
func migratePG(ctx context.Context) error {
	b, err := simbasql.Open(ctx, pgDSN)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Migrate(ctx)
}

func (r *staleResource) close() {
	if r.db != nil {
		_ = r.db.Close()
	}
	for _, c := range []goredis.UniversalClient{r.redis, r.cluster} {
		if c != nil {
			_ = c.Close()
		}
	}
	if r.etcd != nil {
		_ = r.etcd.Close()
	}
}

func (r *staleResource) redisOf(res string) goredis.UniversalClient {
	if res == resCluster {
		return r.cluster
	}
	return r.redis
}

// set writes val to name's resource, unguarded (the harness's own writes).
func (r *staleResource) set(ctx context.Context, res, name, val string) error {
	switch res {
	case resPG:
		_, err := r.db.ExecContext(ctx, "INSERT INTO simba_bench_stale (id, val) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET val = EXCLUDED.val", name, val)
		return err
	case resEtcd:
		_, err := r.etcd.Put(ctx, staleEtcdKey(name), val)
		return err
	}
	return r.redisOf(res).Set(ctx, staleKey(name), val, 0).Err()
}

// get reads name's resource.
func (r *staleResource) get(ctx context.Context, res, name string) (string, error) {
	switch res {
	case resPG:
		var v string
		err := r.db.QueryRowContext(ctx, "SELECT val FROM simba_bench_stale WHERE id = $1", name).Scan(&v)
		return v, err
	case resEtcd:
		resp, err := r.etcd.Get(ctx, staleEtcdKey(name))
		if err != nil {
			return "", err
		}
		if len(resp.Kvs) != 1 {
			return "", fmt.Errorf("etcd: %d keys %s", len(resp.Kvs), staleEtcdKey(name))
		}
		return string(resp.Kvs[0].Value), nil
	}
	return r.redisOf(res).Get(ctx, staleKey(name)).Result()
}

// remove deletes name's resource (the name is this round's own and is never used again), and
// on Redis its fence's record of the highest token. The SQL fence's row stays, as Simba's
// lease rows and hashes do: fencesql has no statement that deletes one, and the fence table's
// SQL comes from spec/ through gen/ only.
func (r *staleResource) remove(ctx context.Context, res, name string) {
	switch res {
	case resPG:
		_, _ = r.db.ExecContext(ctx, "DELETE FROM simba_bench_stale WHERE id = $1", name)
	case resEtcd:
		_, _ = r.etcd.Delete(ctx, staleEtcdKey(name))
	default:
		rc := r.redisOf(res)
		_ = rc.Del(ctx, staleKey(name)).Err()
		_ = rc.Del(ctx, wire.FenceKey(name)).Err()
	}
}

// runStale runs one round of row for the lock name: see the top of this file.
func runStale(ctx context.Context, c conf, lib staleLib, res *staleResource, row staleRow, name string) (staleSample, error) {
	if err := res.set(ctx, row.res, name, valInitial); err != nil {
		return staleSample{}, fmt.Errorf("resource: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res.remove(rctx, row.res, name)
		cancel()
	}()
	h, err := startStaleChild(c.env(), row.role, name)
	if err != nil {
		return staleSample{}, err
	}
	defer h.reap()
	l, err := h.line(ctx, 30*time.Second)
	if err != nil {
		return staleSample{}, err
	}
	tok, ok := strings.CutPrefix(l, "about ")
	if !ok {
		return staleSample{}, fmt.Errorf("holder process said %q", l)
	}
	holderToken, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return staleSample{}, fmt.Errorf("holder process said %q: %w", l, err)
	}
	// The holder has checked its lock and waits for "go": stop it there.
	if err := h.pause(); err != nil {
		return staleSample{}, err
	}
	stopped := time.Now()
	wctx, cancel := context.WithTimeout(ctx, staleWait(c.ttl))
	defer cancel()
	w, err := lib(wctx, name)
	if err != nil {
		return staleSample{}, fmt.Errorf("waiter: %w", err)
	}
	defer w.release()
	if holderToken != 0 && w.token <= holderToken {
		return staleSample{}, fmt.Errorf("waiter's token %d is not above the holder's %d", w.token, holderToken)
	}
	if err := w.write(wctx, valNew); err != nil {
		return staleSample{}, fmt.Errorf("waiter's write: %w", err)
	}
	// Keep the holder stopped for 1.5 TTL at least (it is past its TTL once the waiter holds).
	if d := time.Until(stopped.Add(c.ttl * 3 / 2)); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return staleSample{}, ctx.Err()
		}
	}
	if _, err := io.WriteString(h.in, "go\n"); err != nil {
		return staleSample{}, fmt.Errorf("holder process: %w", err)
	}
	if err := h.resume(); err != nil {
		return staleSample{}, err
	}
	s := staleSample{paused: time.Since(stopped)}
	if l, err = h.line(ctx, 40*time.Second); err != nil {
		return staleSample{}, err
	}
	rest, ok := strings.CutPrefix(l, "result ")
	if !ok {
		return staleSample{}, fmt.Errorf("holder process said %q", l)
	}
	s.outcome, s.detail, _ = strings.Cut(rest, " ")
	v, err := res.get(ctx, row.res, name)
	if err != nil {
		return staleSample{}, fmt.Errorf("reading the resource: %w", err)
	}
	switch v {
	case valStale:
		s.landed = true
	case valNew:
	default:
		return staleSample{}, fmt.Errorf("the resource holds %q, neither holder's value", v)
	}
	return s, nil
}

// staleRound runs one round of every row at once, each with its own holder process, lock name
// and resource, and counts the outcomes into staleOf (new rows are appended to out).
func staleRound(ctx context.Context, c conf, sel selection, round int, staleOf map[rowKey]*staleRes, out *[]*staleRes) error {
	rows := staleRows(c, sel)
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	res, err := openStaleResources(sctx, c, rows)
	cancel()
	if err != nil {
		return err
	}
	defer res.close()
	libs := c.staleLibs()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, row := range rows {
		k := rowKey{row.group, row.name}
		r := staleOf[k]
		if r == nil {
			r = &staleRes{Group: row.group, Name: row.name, Resource: row.res, Check: row.note}
			staleOf[k] = r
			*out = append(*out, r)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, staleWait(c.ttl)+2*time.Minute)
			defer cancel()
			s, err := runStale(rctx, c, libs[row.role], res, row, fmt.Sprintf("bench-%s-stale-%d-%d", c.run, i, round))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.Errors++
				r.LastError = err.Error()
				return
			}
			r.add(s, c.ttl)
		}()
	}
	wg.Wait()
	return nil
}
