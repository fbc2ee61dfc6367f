package access

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/spi"

	simbasql "github.com/simba-go/simba/backend/sql"
)

// serverRoot is a directory for a private server's files, which the server reaches when it
// runs as another user (postgres, when the test runs as root).
func serverRoot(t *testing.T) string {
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestPostgresWrongPassword: on a private PostgreSQL with password authentication, a role
// whose DSN gives a wrong password, and one whose DSN gives none, are refused (28P01) with a
// permanent error matching spi.ErrAccessDenied that says the password is wrong or missing,
// names the role and the ALTER ROLE to fix it, and does not show the password; the right
// password opens a session. On the old code the error said only "the server refused the DSN's
// credentials (an unknown role, a wrong or missing password, no pg_hba.conf entry for it)".
func TestPostgresWrongPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := servers.PostgresPassword(ctx, serverRoot(t), "admin-pw")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admin, err := pgx.Connect(ctx, "postgres://postgres:admin-pw@"+s.Addr()+"/test?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE ROLE simba_pw LOGIN PASSWORD 'right-pw'"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "GRANT CREATE ON SCHEMA public TO simba_pw"); err != nil {
		t.Fatal(err)
	}
	open := func(userinfo string) error {
		b, err := simbasql.Open(ctx, "postgres://"+userinfo+"@"+s.Addr()+"/test?sslmode=disable")
		if err != nil {
			return err
		}
		defer b.Close()
		return b.Migrate(ctx)
	}
	for _, c := range []struct{ what, userinfo, pw string }{
		{"a wrong password", "simba_pw:bad-secret", "bad-secret"},
		{"no password", "simba_pw", ""},
	} {
		err := open(c.userinfo)
		t.Logf("%s: %v", c.what, err)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if !errors.Is(err, spi.ErrAccessDenied) || spi.Classify(err) != spi.Permanent ||
			(c.pw != "" && strings.Contains(msg, c.pw)) {
			t.Errorf("%s: %v; want a permanent spi.ErrAccessDenied without the password", c.what, err)
		}
		for _, want := range []string{"authentication refused", "incorrect or missing password", `ALTER ROLE "simba_pw" PASSWORD`, "28P01"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %v; want it to say %q", c.what, err, want)
			}
		}
	}
	if err := open("simba_pw:right-pw"); err != nil {
		t.Errorf("the right password: %v", err)
	}
}
