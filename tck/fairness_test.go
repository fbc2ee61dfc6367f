package tck_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

func TestMemoryFairnessSpec(t *testing.T) {
	t.Parallel()
	tck.FairnessSpec(t, realTimeFactory())
}

// Without hints (SQLite and MySQL today) the waiter learns of the release at the holder's
// remaining time, and still gets the next tenure.
func TestMemoryFairnessSpecWithoutHints(t *testing.T) {
	t.Parallel()
	f := realTimeFactory()
	newBackend := f.NewBackend
	f.NewBackend = func(t testing.TB, cfg tck.BackendConfig) spi.Backend {
		b := newBackend(t, cfg)
		return struct { // hides spi.Hinter, keeps spi.Queuer
			spi.Backend
			spi.Queuer
		}{b, b.(spi.Queuer)}
	}
	f.ExpireSession, f.Hints, f.GroupHints = nil, false, false
	tck.FairnessSpec(t, f)
}

// On a model whose waiter entries live with their session (spi.SessionQueue, as on ZooKeeper
// and etcd), Queue/WaiterKeepsPlaceWithSession runs (FairnessSpec leaves it out elsewhere), and the clients wait
// without re-attempting before their entries would lapse.
func TestMemoryFairnessSpecSessionWaiters(t *testing.T) {
	t.Parallel()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()),
		simbatest.WithModelOptions(simbatest.WithSessionWaiters()))
	tck.FairnessSpec(t, tck.Factory{
		NewBackend:    func(testing.TB, tck.BackendConfig) spi.Backend { return srv.Backend() },
		ExpireSession: func(_ testing.TB, id spi.SessionID) { srv.ExpireSession(id) },
		Hints:         true,
	})
}

// falseSessionQueue claims spi.SessionQueue for a backend whose entries lapse.
type falseSessionQueue struct {
	spi.Backend
	spi.Queuer
}

func (falseSessionQueue) QueueEntriesLiveWithSession() bool { return true }

// TestFairnessSpecCatchesFalseSessionQueue shows that Queue/WaiterKeepsPlaceWithSession checks
// the claim: on the default model, whose waiter entries lapse with the session's expiry as of
// the latest AcquireQueued, wrapped to report spi.SessionQueue true, it fails (run in a child
// process).
func TestFairnessSpecCatchesFalseSessionQueue(t *testing.T) {
	const sub = "Queue/WaiterKeepsPlaceWithSession"
	if os.Getenv("TCK_FALSE_SESSION_QUEUE") != "" {
		srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
		tck.FairnessSpec(t, tck.Factory{
			NewBackend: func(testing.TB, tck.BackendConfig) spi.Backend {
				b := srv.Backend()
				return falseSessionQueue{b, b}
			},
			ExpireSession: func(_ testing.TB, id spi.SessionID) { srv.ExpireSession(id) },
		})
		return
	}
	t.Parallel()
	out, err := runSubtestInChild("TestFairnessSpecCatchesFalseSessionQueue", sub, "TCK_FALSE_SESSION_QUEUE=1")
	if err == nil {
		t.Fatalf("%s passes on a backend whose entries lapse:\n%s", sub, out)
	}
	if !strings.Contains(out, "--- FAIL: TestFairnessSpecCatchesFalseSessionQueue/"+sub+" ") {
		t.Errorf("subtest %s did not fail on a backend whose entries lapse; output:\n%s", sub, out)
	}
	if !strings.Contains(out, "want held by") {
		t.Errorf("subtest %s failed, but not because the late comer was not held by the waiter; output:\n%s", sub, out)
	}
}

// TestFairnessSpecCatchesUnfairBackend shows that FairnessSpec is not vacuous: on a model that
// ignores its waiter queues (simbatest.WithoutFairness), without hints, run in a child process, each of the
// subtests below fails — the starvation scenario among them.
func TestFairnessSpecCatchesUnfairBackend(t *testing.T) {
	if os.Getenv("TCK_UNFAIR") != "" {
		srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()),
			simbatest.WithModelOptions(simbatest.WithoutFairness()))
		tck.FairnessSpec(t, tck.Factory{
			// Without hints, as on MySQL and SQLite, where the starvation was seen:
			// the waiter learns of a release only at the holder's remaining time.
			NewBackend: func(testing.TB, tck.BackendConfig) spi.Backend {
				b := srv.Backend()
				return struct {
					spi.Backend
					spi.Queuer
				}{b, b}
			},
			ExpireSession: func(_ testing.TB, id spi.SessionID) { srv.ExpireSession(id) },
		})
		return
	}
	for _, sub := range []string{
		"Queue/FreeLeaseGoesToFirstWaiter",
		"Queue/WaitersAreServedInArrivalOrder",
		"Client/LoopingHolderLetsWaiterIn",
	} {
		t.Run(sub, func(t *testing.T) {
			t.Parallel()
			out, err := runSubtestInChild("TestFairnessSpecCatchesUnfairBackend", sub, "TCK_UNFAIR=1")
			if err == nil {
				t.Fatalf("FairnessSpec passes on an unfair backend:\n%s", out)
			}
			if !strings.Contains(out, "--- FAIL: TestFairnessSpecCatchesUnfairBackend/"+sub+" ") {
				t.Errorf("subtest %s did not fail on an unfair backend; output:\n%s", sub, out)
			}
		})
	}
}

// runSubtestInChild runs subtest sub of test in a child process of the test binary with env
// added (which makes the test run its spec there), and returns the child's output and exit.
func runSubtestInChild(test, sub, env string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pattern := strings.ReplaceAll("^"+sub+"$", "/", "$/^")
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$/"+pattern, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
