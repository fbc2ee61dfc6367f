package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/dsn/dsntest"
)

// TestStatusNeverShowsThePassword runs `simba status -dsn D` (against unreachable servers, so
// it fails) and `simba migrate -dsn D` for a DSN of every form with nasty passwords: no error
// shows the password. A DSN without a scheme is an ErrInvalidOption.
func TestStatusNeverShowsThePassword(t *testing.T) {
	for _, f := range dsntest.Forms {
		for _, pw := range []string{"s3cr3tpw", "p@ss/w?rd#:x'y z%"} {
			run := func(d string) string {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				var msg string
				for _, cmd := range []func(context.Context, []string) error{status, migrate} {
					if err := cmd(ctx, []string{"-dsn", d}); err != nil {
						msg += err.Error() + "\n"
					}
				}
				return msg
			}
			if leak := dsntest.Leak(f, "simba", pw, run); leak != "" {
				d, _ := f.Build("simba", pw)
				t.Errorf("%s: simba status/migrate -dsn %q shows %q: %s", f.Name, d, leak, run(d))
			}
		}
	}
	for _, d := range []string{"host=h password=s3cr3tpw", "u:s3cr3tpw@tcp(h:3306)/db"} {
		if _, err := openBackend(context.Background(), d); !errors.Is(err, simba.ErrInvalidOption) {
			t.Errorf("openBackend(%q) = %v, want ErrInvalidOption", d, err)
		}
	}
}

// TestHelpNeverShowsSIMBA_DSN: with a password in $SIMBA_DSN, neither -h nor the help a bad
// flag prints on stderr shows it, and the commands still read the DSN from $SIMBA_DSN. Before,
// the -dsn flag's default was $SIMBA_DSN's value, which the help printed whole
// (`-dsn string ... (default "postgres://postgres:S3cretPW@...")`; trial 32).
func TestHelpNeverShowsSIMBA_DSN(t *testing.T) {
	const secret = "S3cretPW"
	bin := simbaBinary(t)
	for _, args := range [][]string{
		{"lock", "-h"}, {"run", "-h"}, {"status", "-h"}, {"migrate", "-h"},
		{"lock", "-ttl", "x", "--", "true"}, {"status", "-bogus"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "SIMBA_DSN=postgres://postgres:"+secret+"@127.0.0.1:1/test")
		out, _ := cmd.CombinedOutput()
		if strings.Contains(string(out), secret) {
			t.Errorf("simba %s printed $SIMBA_DSN's password:\n%s", strings.Join(args, " "), out)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "lock", "-name", "job", "--", "true")
	cmd.Env = append(os.Environ(), "SIMBA_DSN=sqlite://"+filepath.Join(dir, "simba.db"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("simba lock with the DSN in $SIMBA_DSN: %v\n%s", err, out)
	}
}
