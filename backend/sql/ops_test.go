package sql

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// recordOpsEnv names a file the operations test writes the recorded sequences to, as JSON
// keyed "dialect/case" (TestSpecOrderChangesExecution reads it from a scratch copy's run).
const recordOpsEnv = "SIMBA_RECORD_OPS"

// branch is one path through an operation, told by what the spec's decisions answer on it.
type branch struct {
	outcomes map[string]string // decision → the outcome it answers
	noRows   string            // the steps whose no_rows is this outcome return no row
	errAt    map[string]bool   // the decisions that fail (the operation ends with the error)
	given    map[string]bool   // the if-parameters given
}

// declared walks the spec's steps of op on dialect d (generated/wire) along br and returns the
// queries they run, in order: the sequence the spec declares for that branch.
func declared(t *testing.T, d, op string, br branch) []string {
	t.Helper()
	out, _ := walk(t, d, op, br)
	return out
}

// walk is declared, also returning the outcome the operation ends with. An operation with a
// first try walks that operation first, and its own steps only after a continue outcome.
func walk(t *testing.T, d, op string, br branch) (out []string, outcome string) {
	t.Helper()
	wd, _ := wire.SQLDialectByName(d)
	o, ok := wd.Operations[op]
	if !ok {
		t.Fatalf("no operation %s on %s", op, d)
	}
	if o.First != "" {
		out, outcome = walk(t, d, o.First, br)
		if !slices.Contains(o.FirstContinue, outcome) {
			return out, outcome
		}
		outcome = ""
	}
	// sent appends the steps sent in step i's pipeline after it (a pipelined transaction): they
	// ran though the operation ended at step i.
	sent := func(i int) []string {
		for _, s := range o.Steps[i+1:] {
			if !o.Pipeline || !s.Pipeline {
				break
			}
			if (s.When == "" || s.When == outcome) && (s.If == "" || br.given[s.If]) {
				out = append(out, s.Query)
			}
		}
		return out
	}
	for i, s := range o.Steps {
		if (s.When != "" && s.When != outcome) || (s.If != "" && !br.given[s.If]) {
			continue
		}
		out = append(out, s.Query)
		if o.Batch {
			continue // every statement is sent; the values are read afterwards
		}
		if s.NoRows != "" && s.NoRows == br.noRows {
			return sent(i), br.noRows
		}
		if s.Decide == "" {
			continue
		}
		if br.errAt[s.Decide] {
			return sent(i), ""
		}
		got, ok := br.outcomes[s.Decide]
		if !ok {
			t.Fatalf("%s on %s: the branch says nothing of decision %s", op, d, s.Decide)
		}
		outcome = got
		if slices.Contains(s.Reply, got) {
			return sent(i), outcome
		}
	}
	return out, outcome
}

// recorded opens a migrated backend of dialect d whose operations run on a sqlq.Recorder.
func recorded(t *testing.T, d string, dsn string) (*Backend, *sqlq.Recorder) {
	t.Helper()
	b := migrated(t, dsn, WithHousekeepingInterval(-1))
	rec := &sqlq.Recorder{}
	b.wrap = func(q sqlq.Queries) sqlq.Queries {
		rec.Q = q
		return rec
	}
	return b, rec
}

// TestOperationsFollowSpec: every operation, on every dialect and along every branch of its
// decisions (acquire: session expired, granted to the holder, granted free, taken from an
// expired holder, held by another, corrupt token, token overflow), runs exactly the sqlc
// queries the spec's operation table declares for that branch, recorded by a wrapper of the
// neutral queries interface on the real servers.
func TestOperationsFollowSpec(t *testing.T) {
	all := map[string][]string{}
	exercised := map[string]bool{} // dialect/operation
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b, rec := recorded(t, d.name, d.dsn(t))
			ctx := testCtx(t)
			check := func(name, op string, br branch, f func() error) {
				t.Helper()
				rec.Take()
				if err := f(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got := rec.Take()
				all[d.name+"/"+name] = got
				exercised[d.name+"/"+op] = true
				if want := declared(t, d.name, op, br); !slices.Equal(got, want) {
					t.Errorf("%s: ran %q, the spec declares %q", name, got, want)
				}
			}
			live := branch{outcomes: map[string]string{"renewed": "live", "session_live": "live", "member_row": "live"}}
			expired := branch{outcomes: map[string]string{"renewed": "live", "session_live": "session_expired", "member_row": "session_expired",
				"acquired": "session_expired"}, noRows: "session_expired"}
			refused := branch{errAt: map[string]bool{"acquired": true, "lease_holder": true}}
			acquireAs := func(pg, std string) branch {
				return branch{outcomes: map[string]string{"acquired": pg, "lease_holder": std}}
			}
			open := func(name string) spi.SessionID {
				var s spi.Session
				check(name, "open_session", branch{}, func() (err error) {
					s, err = b.OpenSession(ctx, "ops", longTTL)
					return err
				})
				return s.ID
			}
			wantKind := func(r spi.Acquire, err error, k spi.AcquireKind) error {
				if err == nil && r.Kind != k {
					err = errors.New("reply " + r.Kind.String() + ", want " + k.String())
				}
				return err
			}
			me, other := open("open_session"), open("open_session_2")

			// acquire, every branch.
			check("acquire/free", "acquire", acquireAs("granted", "take"), func() error {
				r, err := b.acquire(ctx, "acquire", string(me), "free")
				return wantKind(r, err, spi.Granted)
			})
			check("acquire/holder", "acquire", acquireAs("granted", "granted"), func() error {
				r, err := b.acquire(ctx, "acquire", string(me), "free")
				return wantKind(r, err, spi.Granted)
			})
			check("acquire/held_by", "acquire", acquireAs("held_by", "held_by"), func() error {
				r, err := b.acquire(ctx, "acquire", string(other), "free")
				return wantKind(r, err, spi.HeldBy)
			})
			gone := openSession(t, b, longTTL)
			grant(t, b, gone, "taken")
			expire(t, b, gone)
			check("acquire/expired_holder", "acquire", acquireAs("granted", "take"), func() error {
				r, err := b.acquire(ctx, "acquire", string(me), "taken")
				return wantKind(r, err, spi.Granted)
			})
			exec(t, b, "INSERT INTO simba_lease (name, session_id, token) VALUES (?, NULL, ?)", "corrupt", int64(-5))
			check("acquire/corrupt_token", "acquire", refused, func() error {
				_, err := b.acquire(ctx, "acquire", string(me), "corrupt")
				if !errors.Is(err, spi.ErrCorruptToken) {
					return errors.New("no ErrCorruptToken: " + errString(err))
				}
				return nil
			})
			exec(t, b, "INSERT INTO simba_lease (name, session_id, token) VALUES (?, NULL, ?)", "overflow", int64(math.MaxInt64))
			check("acquire/token_overflow", "acquire", refused, func() error {
				_, err := b.acquire(ctx, "acquire", string(me), "overflow")
				if !errors.Is(err, spi.ErrTokenOverflow) {
					return errors.New("no ErrTokenOverflow: " + errString(err))
				}
				return nil
			})

			// The waiter queue: acquire_queued's branches, acquire obeying the queue (a free lease
			// reserved for the first waiter, a grant to the head deleting its entry) and withdraw.
			// (PostgreSQL's acquire_queued tries the plain acquire first: its decision answers pg
			// too, and after a held_by the queued steps see the same.)
			queuedAs := func(pg, std string) branch {
				return branch{outcomes: map[string]string{"acquired": pg, "acquired_queued": pg, "lease_holder_queued": std}}
			}
			var qTok int64
			check("acquire_queued/free", "acquire_queued", queuedAs("granted", "take"), func() error {
				r, err := b.acquire(ctx, "acquire_queued", string(me), "q")
				qTok = r.Token
				return wantKind(r, err, spi.Granted)
			})
			check("acquire_queued/holder", "acquire_queued", queuedAs("granted", "granted"), func() error {
				r, err := b.acquire(ctx, "acquire_queued", string(me), "q")
				return wantKind(r, err, spi.Granted)
			})
			check("acquire_queued/held_by", "acquire_queued", queuedAs("held_by", "held_by"), func() error {
				r, err := b.acquire(ctx, "acquire_queued", string(other), "q")
				return wantKind(r, err, spi.HeldBy)
			})
			if err := b.release(ctx, string(me), "q", qTok); err != nil {
				t.Fatal(err)
			}
			check("acquire/reserved_for_waiter", "acquire", acquireAs("held_by", "held_by"), func() error {
				r, err := b.acquire(ctx, "acquire", string(me), "q")
				if err == nil && (r.Kind != spi.HeldBy || r.Holder != other) {
					err = errors.New("reply " + r.Kind.String() + " naming " + string(r.Holder) + ", want HeldBy naming the waiter")
				}
				return err
			})
			check("acquire/head_waiter", "acquire", acquireAs("granted", "take_head"), func() error {
				r, err := b.acquire(ctx, "acquire", string(other), "q")
				qTok = r.Token
				return wantKind(r, err, spi.Granted)
			})
			check("acquire_queued/queued_again", "acquire_queued", queuedAs("held_by", "held_by"), func() error {
				r, err := b.acquire(ctx, "acquire_queued", string(me), "q")
				return wantKind(r, err, spi.HeldBy)
			})
			if err := b.release(ctx, string(other), "q", qTok); err != nil {
				t.Fatal(err)
			}
			check("acquire_queued/head_waiter", "acquire_queued", queuedAs("granted", "take_head"), func() error {
				r, err := b.acquire(ctx, "acquire_queued", string(me), "q")
				qTok = r.Token
				return wantKind(r, err, spi.Granted)
			})
			check("acquire_queued/waiter_again", "acquire_queued", queuedAs("held_by", "held_by"), func() error {
				r, err := b.acquire(ctx, "acquire_queued", string(other), "q")
				return wantKind(r, err, spi.HeldBy)
			})
			check("withdraw", "withdraw", branch{}, func() error { return b.withdraw(ctx, string(other), "q") })
			if err := b.release(ctx, string(me), "q", qTok); err != nil {
				t.Fatal(err)
			}

			// keep-alive, join, leave: live (with and without groups) and expired.
			withGroups := live
			withGroups.given = map[string]bool{"group_names": true}
			check("join/live", "join", live, func() error {
				ok, err := b.join(ctx, string(me), "g")
				if err == nil && !ok {
					err = errors.New("join reported the session expired")
				}
				return err
			})
			check("keep_alive/groups", "keep_alive", withGroups, func() error {
				ka, err := b.keepAlive(ctx, string(me), []string{"g"})
				if err == nil && (ka.Expired || len(ka.Held) != 2 || len(ka.Members["g"]) != 1) {
					err = errors.New("wrong keep-alive reply")
				}
				return err
			})
			check("keep_alive/no_groups", "keep_alive", live, func() error {
				ka, err := b.keepAlive(ctx, string(me), nil)
				if err == nil && (ka.Expired || ka.Remaining <= 0) {
					err = errors.New("wrong keep-alive reply")
				}
				return err
			})
			check("leave/live", "leave", live, func() error {
				ok, err := b.leave(ctx, string(me), "g")
				if err == nil && !ok {
					err = errors.New("leave reported the session expired")
				}
				return err
			})
			check("members", "members", branch{}, func() error { _, err := b.members(ctx, "g"); return err })
			check("inspect", "inspect", branch{}, func() error { _, err := b.inspect(ctx); return err })
			check("inspect_lease/found", "inspect_lease", branch{}, func() error {
				if _, ok, err := b.inspectLease(ctx, "free"); err != nil || !ok {
					return errors.Join(err, errors.New("a lease with a row was not found"))
				}
				return nil
			})
			check("inspect_lease/absent", "inspect_lease", branch{noRows: "absent"}, func() error {
				if _, ok, err := b.inspectLease(ctx, "never-acquired"); err != nil || ok {
					return errors.Join(err, errors.New("a lease without a row was found"))
				}
				return nil
			})
			check("release", "release", branch{}, func() error { return b.release(ctx, string(me), "free", 1) })
			check("clear_foreign_holder", "clear_foreign_holder", branch{}, func() error {
				return b.clearForeignHolder(ctx, "free", "someone")
			})
			check("schema_version", "schema_version", branch{}, func() error { _, err := b.schemaVersion(ctx); return err })
			check("database_now", "database_now", branch{}, func() error { _, err := b.databaseNow(ctx); return err })
			check("housekeeping", "housekeeping", branch{}, func() error { return b.housekeeping(ctx) })
			check("close_session", "close_session", branch{}, func() error { return b.closeSession(ctx, string(other)) })

			expire(t, b, me)
			check("acquire/session_expired", "acquire", expired, func() error {
				r, err := b.acquire(ctx, "acquire", string(me), "free")
				return wantKind(r, err, spi.SessionExpired)
			})
			check("acquire_queued/session_expired", "acquire_queued", expired, func() error {
				r, err := b.acquire(ctx, "acquire_queued", string(me), "free")
				return wantKind(r, err, spi.SessionExpired)
			})
			expiredGroups := expired
			expiredGroups.given = map[string]bool{"group_names": true}
			check("keep_alive/expired", "keep_alive", expiredGroups, func() error {
				ka, err := b.keepAlive(ctx, string(me), []string{"g"})
				if err == nil && !ka.Expired {
					err = errors.New("keep-alive of an expired session did not say so")
				}
				return err
			})
			for _, op := range []string{"join", "leave"} {
				check(op+"/expired", op, expired, func() error {
					ok, err := b.joinLeaveOp(ctx, op, string(me), "g")
					if err == nil && ok {
						err = errors.New(op + " of an expired session did not say so")
					}
					return err
				})
			}
		})
	}
	// Every operation of the spec was exercised on every dialect that ran (-run may select one).
	for _, d := range dialects {
		wd, _ := wire.SQLDialectByName(d.name)
		for op := range wd.Operations {
			if exercised[d.name+"/open_session"] && !exercised[d.name+"/"+op] && !t.Failed() {
				t.Errorf("%s: operation %s was not exercised", d.name, op)
			}
		}
	}
	if path := os.Getenv(recordOpsEnv); path != "" {
		data, err := json.MarshalIndent(all, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// TestDecisionsMatchSpec: the package implements exactly the decisions spec/sql.yaml declares,
// and every dialect's operation table compiles.
func TestDecisionsMatchSpec(t *testing.T) {
	spec := wire.SQLDecisions()
	for name := range decisions {
		if _, ok := spec[name]; !ok {
			t.Errorf("decision %s is implemented but not declared in spec/sql.yaml", name)
		}
	}
	for name := range spec {
		if _, ok := decisions[name]; !ok {
			t.Errorf("decision %s is declared in spec/sql.yaml but not implemented", name)
		}
	}
	for _, d := range dialects {
		if _, err := compilePlans(d.name); err != nil {
			t.Error(err)
		}
	}
}

// TestSpecOrderChangesExecution: on a scratch copy of the repository whose spec/sql.yaml swaps
// two statements of close_session, go generate and the operations test (on SQLite) record the
// swapped order: the backend runs what the spec declares, nothing else decides the order.
func TestSpecOrderChangesExecution(t *testing.T) {
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	list, err := osexec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	scratch := t.TempDir()
	for _, rel := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(scratch, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	specPath := filepath.Join(scratch, "spec", "sql.yaml")
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	const before = "statements: [close_session, close_session_release, close_session_leave, close_session_delete]"
	const after = "statements: [close_session, close_session_leave, close_session_release, close_session_delete]"
	if n := strings.Count(string(spec), before); n != 1 {
		t.Fatalf("spec/sql.yaml holds %q %d times, want once", before, n)
	}
	if err := os.WriteFile(specPath, []byte(strings.Replace(string(spec), before, after, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) {
		t.Helper()
		// Each command compiles (the generator, the changed generated packages, the backend
		// and its test binary): on a loaded 2-core machine that can take longer than
		// testCtx's two minutes, so it gets ten; the test binary's -timeout still bounds it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := osexec.CommandContext(ctx, goCmd, args...)
		cmd.Dir = scratch
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(nil, "generate", "./...")
	out := filepath.Join(scratch, "ops.json")
	run([]string{recordOpsEnv + "=" + out}, "test", "-count=1", "-run", "^TestOperationsFollowSpec$/^sqlite$", "./backend/sql")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string][]string
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	ours := declared(t, "sqlite", "close_session", branch{})
	want := []string{"CloseSessionLeave", "CloseSessionRelease", "CloseSessionDelete"}
	if slices.Equal(ours, want) {
		t.Fatalf("this tree's spec already runs %q", want)
	}
	if !slices.Equal(got["sqlite/close_session"], want) {
		t.Errorf("after swapping two statements in the spec, close_session ran %q, want %q (this tree: %q)", got["sqlite/close_session"], want, ours)
	}
}

// TestTransactionOnEveryDialect: with every operation made transactional (PostgreSQL's spec
// declares none today), the operations run between the dialect's begin and COMMIT on every
// dialect and their writes commit; a decision's error fails the operation (ROLLBACK) and leaves
// the lease as it was.
func TestTransactionOnEveryDialect(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b, rec := recorded(t, d.name, d.dsn(t))
			ctx := testCtx(t)
			for _, p := range b.plans {
				p.tx = true
			}
			s := openSession(t, b, longTTL)
			tok := grant(t, b, s, "tx")
			if err := b.Release(ctx, s, "tx", tok); err != nil {
				t.Fatal(err)
			}
			if again := grant(t, b, s, "tx"); again <= tok {
				t.Fatalf("token %d after %d: the release did not commit", again, tok)
			}
			// A refused token fails the acquire's decision.
			exec(t, b, "INSERT INTO simba_lease (name, session_id, token) VALUES (?, NULL, ?)", "tx-corrupt", int64(-5))
			rec.Take()
			if _, err := b.Acquire(ctx, s, "tx-corrupt"); !errors.Is(err, spi.ErrCorruptToken) {
				t.Fatalf("acquire of a corrupt token: %v", err)
			}
			if len(rec.Take()) == 0 {
				t.Fatal("the acquire ran no statement")
			}
			if tok, holder, _ := leaseToken(t, b, "tx-corrupt"); tok != -5 || holder != "" {
				t.Fatalf("after the rolled-back acquire the lease holds token %d, holder %q", tok, holder)
			}
		})
	}
}
