package etcd

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
)

// TestCredentialsOnAServerWithAuthOffWarn: a DSN with a user and password on a server whose
// authentication is off works (etcd's client takes "authentication is not enabled" as
// success) but checks nothing: a wrong password works too, and anyone who reaches the server
// can write Simba's keys. The backend says so once, at WARN; without credentials it says
// nothing. Trial 30 met it: `simba status` with root:wrong@ exited 0 on such a server. A server
// before 3.5 has no AuthStatus, so the backend cannot tell and stays silent.
func TestCredentialsOnAServerWithAuthOffWarn(t *testing.T) {
	eps := testenv.Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := rawClient(t, eps)
	st, err := cli.Status(ctx, eps[0])
	if err != nil {
		t.Fatal(err)
	}
	// AuthStatus came with etcd 3.5.
	canTell := !strings.HasPrefix(st.Version, "3.4.") && !strings.HasPrefix(st.Version, "3.3.")
	if auth, err := cli.AuthStatus(ctx); err == nil && auth.Enabled {
		t.Fatalf("the test server %s has authentication on; this test needs it off", eps[0])
	}
	const warning = "the server's authentication is off"
	for _, tc := range []struct {
		name, userinfo string
		want           int
	}{
		{"wrong password", "root:n0t-the-pw@", 1},
		{"no credentials", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testenv.LogBuffer
			b := openBackend(t, "etcd://"+tc.userinfo+strings.Join(eps, ",")+testPrefix(t), WithSlog(slog.New(slog.NewTextHandler(&logs, nil))))
			for range 2 {
				s, err := b.OpenSession(ctx, "authoff", 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.CloseSession(ctx, s.ID); err != nil {
					t.Fatal(err)
				}
			}
			want := tc.want
			if !canTell {
				want = 0
			}
			if got := strings.Count(logs.String(), warning); got != want {
				t.Errorf("server %s: %d warnings saying %q, want %d; logs:\n%s", st.Version, got, warning, want, logs.String())
			}
			if strings.Contains(logs.String(), "n0t-the-pw") {
				t.Errorf("the warning shows the password: %s", logs.String())
			}
		})
	}
}
