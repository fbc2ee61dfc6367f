package redis

import (
	"strings"
	"testing"

	"github.com/simba-go/simba/internal/dsn/dsntest"
)

// dsnErrors returns the error messages of ParseDSN and Open for d, joined. Neither does I/O.
func dsnErrors(d string) string {
	var msgs []string
	if _, err := ParseDSN(d); err != nil {
		msgs = append(msgs, err.Error())
	}
	if b, err := Open(d); err != nil {
		msgs = append(msgs, err.Error())
	} else {
		b.Close()
	}
	return strings.Join(msgs, "\n")
}

// FuzzDSN: no error of ParseDSN or Open shows the password of the DSN, whatever its form (the
// Redis ones, and the forms a user may pass by mistake) and whatever the password.
func FuzzDSN(f *testing.F) {
	forms := dsntest.Select("redis", "rediss", "other", "postgres-keyword")
	dsntest.Seed(forms, f.Add)
	f.Fuzz(func(t *testing.T, form uint8, user, pw string) {
		fm := forms[int(form)%len(forms)]
		if leak := dsntest.Leak(fm, user, pw, dsnErrors); leak != "" {
			d, _ := fm.Build(user, pw)
			t.Fatalf("%s: the errors for %q show %q:\n%s", fm.Name, d, leak, dsnErrors(d))
		}
	})
}
