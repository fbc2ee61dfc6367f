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
	f.ExpireSession, f.Hints = nil, false
	tck.FairnessSpec(t, f)
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
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			pattern := strings.ReplaceAll("^"+sub+"$", "/", "$/^")
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFairnessSpecCatchesUnfairBackend$/"+pattern, "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "TCK_UNFAIR=1")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("FairnessSpec passes on an unfair backend:\n%s", out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestFairnessSpecCatchesUnfairBackend/"+sub+" ") {
				t.Errorf("subtest %s did not fail on an unfair backend; output:\n%s", sub, out)
			}
		})
	}
}
