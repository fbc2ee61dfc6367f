package tck_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

// mutant is simbatest with one rule of the wire semantics broken, and the subtests of the suites
// that must catch it.
type mutant struct {
	wrap func(b *simbatest.Backend, cfg tck.BackendConfig) spi.Backend
	// factory, if not nil, changes the memory factory (for a mutant of an optional hook's
	// backend).
	factory func(f *tck.Factory, srv *simbatest.Server)
	fails   []string
}

// steadyClaimed is a simbatest backend that reports spi.SteadyHints whatever its model.
type steadyClaimed struct{ *simbatest.Backend }

// HintsSteady implements spi.SteadyHints.
func (steadyClaimed) HintsSteady() bool { return true }

// broken wraps a simbatest backend; each mutant overrides one method through a hook.
type broken struct {
	*simbatest.Backend
	cfg       tck.BackendConfig
	acquire   func(b *broken, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error)
	release   func(b *broken, ctx context.Context, s spi.SessionID, name string, token int64) error
	keepAlive func(b *broken, ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error)
	join      func(b *broken, ctx context.Context, s spi.SessionID, group string) (spi.Status, error)
	leave     func(b *broken, ctx context.Context, s spi.SessionID, group string) (spi.Status, error)
	close     func(b *broken, ctx context.Context, s spi.SessionID) error
	members   func(b *broken, ctx context.Context, group string) ([]spi.SessionID, error)
	inspect   func(b *broken, ctx context.Context, name string) (spi.LeaseInfo, bool, error)
	hints     func(b *broken, ctx context.Context) (<-chan spi.Hint, error)
	shut      func(b *broken) error
}

func (b *broken) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	if b.hints != nil {
		return b.hints(b, ctx)
	}
	return b.Backend.Hints(ctx)
}

func (b *broken) Close() error {
	if b.shut != nil {
		return b.shut(b)
	}
	return b.Backend.Close()
}

// heldBy returns the names of names that s holds at the server, by the simbatest server's
// own view.
func (b *broken) heldBy(s spi.SessionID, names []string) map[string]bool {
	held := map[string]bool{}
	for _, n := range names {
		if info, ok := b.Server().Lease(n); ok && info.Holder == s {
			held[n] = true
		}
	}
	return held
}

// raceWindow is how long the keep-alive mutants below take between the read and the write
// their broken keep-alive makes, so that a call racing it lands in between.
const raceWindow = 2 * time.Millisecond

func (b *broken) InspectLease(ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
	if b.inspect != nil {
		return b.inspect(b, ctx, name)
	}
	return b.Backend.InspectLease(ctx, name)
}

// lastGranted remembers the latest grant of each name of the "inspect-lease-keeps-holder"
// mutant, across its clients.
var lastGranted sync.Map // name -> spi.LeaseInfo

func (b *broken) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	if b.members != nil {
		return b.members(b, ctx, group)
	}
	return b.Backend.Members(ctx, group)
}

// joined remembers every join of the "members-outlive-sessions" mutant, across its clients.
var joined sync.Map // group -> *sync.Map of spi.SessionID

func (b *broken) Acquire(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	if b.acquire != nil {
		return b.acquire(b, ctx, s, name)
	}
	return b.Backend.Acquire(ctx, s, name)
}

// AcquireQueued goes through the acquire hook too (waiting acquires are Lock's and elections'),
// so that a mutant's broken acquire is what every client sees.
func (b *broken) AcquireQueued(ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
	if b.acquire != nil {
		return b.acquire(b, ctx, s, name)
	}
	return b.Backend.AcquireQueued(ctx, s, name)
}

func (b *broken) Release(ctx context.Context, s spi.SessionID, name string, token int64) error {
	if b.release != nil {
		return b.release(b, ctx, s, name, token)
	}
	return b.Backend.Release(ctx, s, name, token)
}

func (b *broken) KeepAlive(ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
	if b.keepAlive != nil {
		return b.keepAlive(b, ctx, s, names, groups)
	}
	return b.Backend.KeepAlive(ctx, s, names, groups)
}

func (b *broken) Join(ctx context.Context, s spi.SessionID, group string) (spi.Status, error) {
	if b.join != nil {
		return b.join(b, ctx, s, group)
	}
	return b.Backend.Join(ctx, s, group)
}

func (b *broken) Leave(ctx context.Context, s spi.SessionID, group string) (spi.Status, error) {
	if b.leave != nil {
		return b.leave(b, ctx, s, group)
	}
	return b.Backend.Leave(ctx, s, group)
}

func (b *broken) CloseSession(ctx context.Context, s spi.SessionID) error {
	if b.close != nil {
		return b.close(b, ctx, s)
	}
	return b.Backend.CloseSession(ctx, s)
}

// with builds a mutant's wrap from a function that sets hooks.
func with(set func(b *broken)) func(*simbatest.Backend, tck.BackendConfig) spi.Backend {
	return func(sb *simbatest.Backend, cfg tck.BackendConfig) spi.Backend {
		b := &broken{Backend: sb, cfg: cfg}
		set(b)
		return b
	}
}

// escape maps characters the grammar forbids to ones it allows: a backend that "sanitises"
// names instead of rejecting them.
var escape = strings.NewReplacer("/", "_", " ", "_", "\x00", "_", "*", "_", "{", "_", "}", "_", "é", "e")

var mutants = map[string]mutant{
	"constant-token": {
		wrap: with(func(b *broken) {
			b.acquire = func(b *broken, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
				r, err := b.Backend.Acquire(ctx, s, name)
				if r.Kind == spi.Granted {
					r.Token = 1
				}
				return r, err
			}
		}),
		fails: []string{"FencingSpec/TokensIncrease/AcrossReleases", "FencingSpec/TokensIncrease/AcrossExpiries", "LeaseBackendSpec/Leases/ReleaseFreesForOthers"},
	},
	"release-ignores-token": {
		wrap: with(func(b *broken) {
			b.release = func(b *broken, ctx context.Context, s spi.SessionID, name string, _ int64) error {
				if info, ok := b.Server().Lease(name); ok && info.Holder == s {
					return b.Backend.Release(ctx, s, name, info.Token)
				}
				return nil
			}
		}),
		fails: []string{"LeaseBackendSpec/Leases/ReleaseWithWrongTokenOrSessionChangesNothing"},
	},
	// ZooKeeper's hole of 2026-12: a delete can check only the node's data version, the same
	// for every term, so a late release of an old token freed the session's next term.
	"stale-release-frees-the-next-term": {
		wrap: with(func(b *broken) {
			var mu sync.Mutex
			granted := map[string]bool{} // session, name, token of every grant
			key := func(s spi.SessionID, name string, tok int64) string { return fmt.Sprint(s, "\x00", name, "\x00", tok) }
			b.acquire = func(b *broken, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
				r, err := b.Backend.Acquire(ctx, s, name)
				if err == nil && r.Kind == spi.Granted {
					mu.Lock()
					granted[key(s, name, r.Token)] = true
					mu.Unlock()
				}
				return r, err
			}
			b.release = func(b *broken, ctx context.Context, s spi.SessionID, name string, token int64) error {
				mu.Lock()
				was := granted[key(s, name, token)]
				mu.Unlock()
				if info, ok := b.Server().Lease(name); ok && info.Holder == s && was {
					return b.Backend.Release(ctx, s, name, info.Token)
				}
				return b.Backend.Release(ctx, s, name, token)
			}
		}),
		fails: []string{"LeaseBackendSpec/Leases/StaleReleaseLeavesTheNextTerm"},
	},
	"release-ignores-session": {
		wrap: with(func(b *broken) {
			b.release = func(b *broken, ctx context.Context, _ spi.SessionID, name string, token int64) error {
				if info, ok := b.Server().Lease(name); ok && info.Holder != "" {
					return b.Backend.Release(ctx, info.Holder, name, token)
				}
				return nil
			}
		}),
		fails: []string{"LeaseBackendSpec/Leases/ReleaseWithWrongTokenOrSessionChangesNothing"},
	},
	"session-never-expires": {
		wrap: with(func(b *broken) {
			b.keepAlive = func(b *broken, ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
				ka, err := b.Backend.KeepAlive(ctx, s, names, groups)
				if ka.Expired {
					return spi.KeepAlive{Remaining: time.Second}, err
				}
				return ka, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Sessions/ExpiresAfterTTLWithoutKeepAlive", "LeaseBackendSpec/Sessions/ExpiredCannotKeepAliveAcquireOrJoin", "LeaseBackendSpec/Sessions/CloseReleasesEverything"},
	},
	"expired-session-acquires": {
		wrap: with(func(b *broken) {
			b.acquire = func(b *broken, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
				r, err := b.Backend.Acquire(ctx, s, name)
				if r.Kind == spi.SessionExpired {
					fresh, _ := b.Backend.OpenSession(ctx, "zombie", time.Minute)
					return b.Backend.Acquire(ctx, fresh.ID, name)
				}
				return r, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Sessions/ExpiredCannotKeepAliveAcquireOrJoin", "LeaseBackendSpec/Leases/TakeoverAfterHolderExpiryHasGreaterToken"},
	},
	"double-grant": {
		wrap: with(func(b *broken) {
			b.acquire = func(b *broken, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
				r, err := b.Backend.Acquire(ctx, s, name)
				if r.Kind == spi.HeldBy {
					info, _ := b.Server().Lease(name)
					return spi.Acquire{Kind: spi.Granted, Token: info.Token, Remaining: r.Remaining}, err
				}
				return r, err
			}
		}),
		fails: []string{"FencingSpec/Concurrent/ExactlyOneGrantedOfFreeLease", "LeaseBackendSpec/Leases/HeldIsHeldByWithHolderRemaining"},
	},
	"held-by-asker-remaining": {
		wrap: with(func(b *broken) {
			b.acquire = func(b *broken, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
				r, err := b.Backend.Acquire(ctx, s, name)
				if r.Kind == spi.HeldBy {
					r.Remaining += time.Hour
				}
				return r, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Leases/HeldIsHeldByWithHolderRemaining", "LeaseBackendSpec/Time/RemainingIsBackendTime"},
	},
	"keep-alive-omits-held": {
		wrap: with(func(b *broken) {
			b.keepAlive = func(b *broken, ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
				ka, err := b.Backend.KeepAlive(ctx, s, names, groups)
				ka.Held = nil
				return ka, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Sessions/KeepAliveReturnsRemainingAndHeldLeases", "LeaseBackendSpec/Leases/ReacquireByHolderIsIdempotent"},
	},
	"keep-alive-reports-others": {
		wrap: with(func(b *broken) {
			b.keepAlive = func(b *broken, ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
				ka, err := b.Backend.KeepAlive(ctx, s, names, groups)
				ka.Held = nil
				for _, n := range names {
					if info, ok := b.Server().Lease(n); ok && info.Holder != "" {
						ka.Held = append(ka.Held, spi.Held{Name: n, Token: info.Token})
					}
				}
				return ka, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Sessions/KeepAliveReturnsRemainingAndHeldLeases"},
	},
	"case-insensitive": {
		wrap: with(func(b *broken) {
			b.acquire = func(b *broken, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
				return b.Backend.Acquire(ctx, s, strings.ToLower(name))
			}
		}),
		fails: []string{"LeaseBackendSpec/Names/CaseSensitive"},
	},
	"sanitises-names": {
		wrap: with(func(b *broken) {
			b.acquire = func(b *broken, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
				return b.Backend.Acquire(ctx, s, escape.Replace(name))
			}
		}),
		fails: []string{"LeaseBackendSpec/Names/InvalidNamesAreRejected"},
	},
	"leave-does-nothing": {
		wrap: with(func(b *broken) {
			b.leave = func(*broken, context.Context, spi.SessionID, string) (spi.Status, error) { return spi.OK, nil }
		}),
		fails: []string{"LeaseBackendSpec/Groups/Leave"},
	},
	"members-outlive-sessions": {
		wrap: with(func(b *broken) {
			b.join = func(b *broken, ctx context.Context, s spi.SessionID, group string) (spi.Status, error) {
				st, err := b.Backend.Join(ctx, s, group)
				if st == spi.OK {
					m, _ := joined.LoadOrStore(group, &sync.Map{})
					m.(*sync.Map).Store(s, true)
				}
				return st, err
			}
			b.members = func(b *broken, ctx context.Context, group string) ([]spi.SessionID, error) {
				ms, err := b.Backend.Members(ctx, group)
				if m, ok := joined.Load(group); ok {
					m.(*sync.Map).Range(func(k, _ any) bool {
						if id := k.(spi.SessionID); !slices.Contains(ms, id) {
							ms = append(ms, id)
						}
						return true
					})
				}
				slices.Sort(ms)
				return ms, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Groups/ExpiryRemovesMember", "LeaseBackendSpec/Sessions/CloseReleasesEverything"},
	},
	"close-keeps-leases": {
		wrap: with(func(b *broken) {
			b.close = func(*broken, context.Context, spi.SessionID) error { return nil }
		}),
		fails: []string{"LeaseBackendSpec/Sessions/CloseReleasesEverything", "FencingSpec/TokensIncrease/AcrossHolders"},
	},
	"client-clock-decides": {
		wrap: with(func(b *broken) {
			start := b.cfg.Clock.Now()
			b.keepAlive = func(b *broken, ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
				ka, err := b.Backend.KeepAlive(ctx, s, names, groups)
				// A backend that ages the reply by the client's clock.
				if ka.Remaining -= b.cfg.Clock.Now() - start; !ka.Expired && ka.Remaining <= 0 {
					return spi.KeepAlive{Expired: true}, err
				}
				return ka, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Time/ClientClockJumpsChangeNothing"},
	},
	// A backend whose InspectLease (what fence.LeaseVerifier trusts) keeps showing a lease's
	// latest holder once its tenure ended (released, expired, closed), where Inspect shows it
	// free: a verifier on it would admit an ended tenure's token.
	"inspect-lease-keeps-holder": {
		wrap: with(func(b *broken) {
			b.acquire = func(b *broken, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
				r, err := b.Backend.Acquire(ctx, s, name)
				if err == nil && r.Kind == spi.Granted {
					lastGranted.Store(name, spi.LeaseInfo{Name: name, Holder: s, Token: r.Token})
				}
				return r, err
			}
			b.inspect = func(b *broken, ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
				info, ok, err := b.Backend.InspectLease(ctx, name)
				if last, seen := lastGranted.Load(name); err == nil && ok && info.Holder == "" && seen {
					l := last.(spi.LeaseInfo)
					info.Holder, info.Owner, info.Token = l.Holder, "tck:stale", l.Token
				}
				return info, ok, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Inspect/ReleasedAgrees", "LeaseBackendSpec/Inspect/ExpiredHolderAgrees", "LeaseBackendSpec/Inspect/ClosedHolderAgrees"},
	},
	// A backend whose InspectLease finds every name, as a free lease, even one never acquired.
	"inspect-lease-finds-any-name": {
		wrap: with(func(b *broken) {
			b.inspect = func(b *broken, ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
				info, _, err := b.Backend.InspectLease(ctx, name)
				return spi.LeaseInfo{Name: name, Holder: info.Holder, Owner: info.Owner, Token: info.Token, Remaining: info.Remaining}, err == nil, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Inspect/NeverAcquiredAgrees"},
	},
	// A backend whose InspectLease reports another token than Inspect does.
	"inspect-lease-wrong-token": {
		wrap: with(func(b *broken) {
			b.inspect = func(b *broken, ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
				info, ok, err := b.Backend.InspectLease(ctx, name)
				info.Token++
				return info, ok, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Inspect/HeldAgrees"},
	},
	// A backend whose Close does nothing: calls after it still reach the server.
	"close-does-nothing": {
		wrap: with(func(b *broken) {
			b.shut = func(*broken) error { return nil }
		}),
		fails: []string{"LeaseBackendSpec/Closed/CallsFailWithErrBackendClosed"},
	},
	// A backend whose calls after Close fail with spi.ErrClosed, the client's sentinel, which
	// does not match spi.ErrBackendClosed (examples/backend did so until 2026-12).
	"closed-says-err-closed": {
		wrap: with(func(b *broken) {
			b.acquire = func(b *broken, ctx context.Context, s spi.SessionID, name string) (spi.Acquire, error) {
				r, err := b.Backend.Acquire(ctx, s, name)
				if errors.Is(err, spi.ErrBackendClosed) {
					return spi.Acquire{}, fmt.Errorf("mutant: acquire: %w", spi.ErrClosed)
				}
				return r, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Closed/CallsFailWithErrBackendClosed"},
	},
	// A backend whose hint channel carries Released hints only, though the factory says it
	// sends GroupChanged hints too.
	"no-group-changed-hints": {
		wrap: with(func(b *broken) {
			b.hints = func(b *broken, ctx context.Context) (<-chan spi.Hint, error) {
				in, err := b.Backend.Hints(ctx)
				if err != nil {
					return nil, err
				}
				out := make(chan spi.Hint, cap(in))
				go func() {
					defer close(out)
					for h := range in {
						if h.Kind != spi.GroupChanged {
							out <- h
						}
					}
				}()
				return out, nil
			}
		}),
		fails: []string{"LeaseBackendSpec/Hints/GroupChangedOnJoinAndLeave"},
	},
	// A backend whose keep-alive reads which of names the session holds, then renews them in a
	// second step (as a Redis KeepAlive renewing lease keys by a held list it read before would),
	// taking back a lease released in between.
	"keep-alive-revives-released": {
		wrap: with(func(b *broken) {
			b.keepAlive = func(b *broken, ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
				ka, err := b.Backend.KeepAlive(ctx, s, names, groups)
				time.Sleep(raceWindow)
				for _, held := range ka.Held {
					if info, ok := b.Server().Lease(held.Name); ok && info.Holder == "" {
						b.Backend.Acquire(ctx, s, held.Name)
					}
				}
				return ka, err
			}
		}),
		fails: []string{"FencingSpec/Concurrent/KeepAliveRacesOwnAcquireAndRelease"},
	},
	// A backend whose keep-alive reads the session's leases among names, then writes that set
	// back, releasing a lease the session was granted in between.
	"keep-alive-writes-back-stale-held": {
		wrap: with(func(b *broken) {
			b.keepAlive = func(b *broken, ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
				before := b.heldBy(s, names)
				time.Sleep(raceWindow)
				ka, err := b.Backend.KeepAlive(ctx, s, names, groups)
				for _, held := range ka.Held {
					if !before[held.Name] {
						b.Backend.Release(ctx, s, held.Name, held.Token)
					}
				}
				ka.Held = slices.DeleteFunc(ka.Held, func(h spi.Held) bool { return !before[h.Name] })
				return ka, err
			}
		}),
		fails: []string{"FencingSpec/Concurrent/KeepAliveRacesOwnAcquireAndRelease"},
	},
	// A backend whose keep-alive reads the session's memberships, then refreshes them in a
	// second step that adds the session again (a Redis ZADD without XX would), undoing a leave
	// made in between.
	"keep-alive-undoes-leave": {
		wrap: with(func(b *broken) {
			b.keepAlive = func(b *broken, ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
				ka, err := b.Backend.KeepAlive(ctx, s, names, groups)
				time.Sleep(raceWindow)
				for g, ms := range ka.Members {
					if slices.Contains(ms, s) {
						b.Backend.Join(ctx, s, g)
					}
				}
				return ka, err
			}
		}),
		fails: []string{"LeaseBackendSpec/Groups/KeepAliveRacesJoinAndLeave"},
	},
	// A backend whose keep-alive reads each lease it is asked about in a round trip of its
	// own before it renews the session: correct replies, unbounded round trips.
	"keep-alive-reads-each-name": {
		wrap: with(func(b *broken) {
			b.keepAlive = func(b *broken, ctx context.Context, s spi.SessionID, names, groups []string) (spi.KeepAlive, error) {
				for _, n := range names {
					if _, _, err := b.Backend.InspectLease(ctx, n); err != nil {
						return spi.KeepAlive{}, err
					}
				}
				return b.Backend.KeepAlive(ctx, s, names, groups)
			}
		}),
		fails: []string{"LeaseBackendSpec/Bounded/KeepAliveAndCloseDoNotGrow"},
	},
	// A backend that reports spi.SteadyHints but whose hints go with its connection: a
	// simbatest link drops every hint while it is cut, and nothing hints the release made
	// meanwhile once it is restored.
	"steady-hints-lost-across-reconnect": {
		factory: func(f *tck.Factory, srv *simbatest.Server) {
			f.NewCuttableBackend = func(testing.TB, tck.BackendConfig) (spi.Backend, func() func()) {
				l := simbatest.NewLink(steadyClaimed{srv.Backend()})
				return l.Backend(), func() func() {
					l.CutOff()
					return l.Restore
				}
			}
		},
		fails: []string{"LeaseBackendSpec/Hints/SurvivesReconnect"},
	},
}

// TestSuitesCatchMutants shows that the suites are not vacuous: for each mutant of simbatest
// with one rule broken, it runs both suites in a child process and checks that they fail, in the
// subtests expected to catch that rule.
func TestSuitesCatchMutants(t *testing.T) {
	if name := os.Getenv("TCK_MUTANT"); name != "" {
		runMutant(t, name)
		return
	}
	for name, m := range mutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSuitesCatchMutants$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "TCK_MUTANT="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suites pass on mutant %s:\n%s", name, out)
			}
			for _, sub := range m.fails {
				if !strings.Contains(string(out), "--- FAIL: TestSuitesCatchMutants/"+sub+" ") {
					t.Errorf("mutant %s: subtest %s did not fail; output:\n%s", name, sub, out)
				}
			}
		})
	}
}

// runMutant is the child process: it runs both suites on the named mutant.
func runMutant(t *testing.T, name string) {
	m, ok := mutants[name]
	if !ok {
		t.Fatalf("unknown mutant %q", name)
	}
	f, srv := memoryFactory(m.wrap)
	if m.factory != nil {
		m.factory(&f, srv)
	}
	t.Run("LeaseBackendSpec", func(t *testing.T) { tck.LeaseBackendSpec(t, f) })
	t.Run("FencingSpec", func(t *testing.T) { tck.FencingSpec(t, f) })
}
