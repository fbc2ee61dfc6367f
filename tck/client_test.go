package tck_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

// Every test of the package, ClientSpec's clients included, must leave no goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// realTimeFactory is a simbatest server on the real clock, as ClientSpec needs: its clients
// cannot run on a virtual clock.
func realTimeFactory() tck.Factory {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	return tck.Factory{
		NewBackend:    func(testing.TB, tck.BackendConfig) spi.Backend { return srv.Backend() },
		ExpireSession: func(_ testing.TB, id spi.SessionID) { srv.ExpireSession(id) },
		Hints:         true,
	}
}

func TestMemoryClientSpec(t *testing.T) {
	t.Parallel()
	tck.ClientSpec(t, realTimeFactory())
}

// Backends without hints (SQLite, MySQL) and without an expiry hook pass too: candidates find
// released leases by retrying at the holder's remaining time.
func TestMemoryClientSpecWithoutHintsOrExpiryHook(t *testing.T) {
	t.Parallel()
	f := realTimeFactory()
	newBackend := f.NewBackend
	f.NewBackend = func(t testing.TB, cfg tck.BackendConfig) spi.Backend {
		return struct{ spi.Backend }{newBackend(t, cfg)} // hides spi.Hinter
	}
	f.ExpireSession, f.Hints, f.GroupHints = nil, false, false
	tck.ClientSpec(t, f)
}

// clientMutants names mutants of simbatest (see mutants) and the ClientSpec subtests that must
// catch each: a backend that breaks the wire semantics breaks the clients' guarantees.
var clientMutants = map[string][]string{
	"double-grant":          {"Election/OneLeaderAmongThree", "Lock/LockTryLockUnlockWithLock"},
	"keep-alive-omits-held": {"Election/OneLeaderAmongThree"},
	"constant-token":        {"Lock/LockTryLockUnlockWithLock"},
}

// TestClientSpecCatchesMutants shows that ClientSpec is not vacuous: on each mutant it runs the
// subtests expected to catch it, in a child process, and checks that they fail.
func TestClientSpecCatchesMutants(t *testing.T) {
	if name := os.Getenv("TCK_CLIENT_MUTANT"); name != "" {
		m, ok := mutants[name]
		if !ok {
			t.Fatalf("unknown mutant %q", name)
		}
		f := realTimeFactory()
		srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
		f.NewBackend = func(_ testing.TB, cfg tck.BackendConfig) spi.Backend { return m.wrap(srv.Backend(), cfg) }
		f.ExpireSession = func(_ testing.TB, id spi.SessionID) { srv.ExpireSession(id) }
		tck.ClientSpec(t, f)
		return
	}
	for name, fails := range clientMutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var run []string
			for _, sub := range fails {
				run = append(run, strings.ReplaceAll("^"+sub+"$", "/", "$/^"))
			}
			// One -test.run pattern per level: ^Test$/^(A|B)$/^(X|Y)$ would cross the pairs,
			// so each expected subtest gets its own child.
			for i, pattern := range run {
				cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestClientSpecCatchesMutants$/"+pattern, "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(), "TCK_CLIENT_MUTANT="+name)
				out, err := cmd.CombinedOutput()
				if err == nil {
					t.Fatalf("ClientSpec passes on mutant %s:\n%s", name, out)
				}
				if !strings.Contains(string(out), "--- FAIL: TestClientSpecCatchesMutants/"+fails[i]+" ") {
					t.Errorf("mutant %s: subtest %s did not fail; output:\n%s", name, fails[i], out)
				}
			}
		})
	}
}
