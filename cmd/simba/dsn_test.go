package main

import (
	"context"
	"errors"
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
