package sql

import (
	"context"
	"strings"
	"testing"

	"github.com/simba-go/simba/internal/dsn/dsntest"
)

// dsnErrors returns every error message the DSN constructors (Open, MySQLConfig, SQLiteDSN)
// give for d, joined. None of them does I/O.
func dsnErrors(d string) string {
	var msgs []string
	if b, err := Open(context.Background(), d); err != nil {
		msgs = append(msgs, err.Error())
	} else {
		b.Close()
	}
	if _, err := MySQLConfig(d); err != nil {
		msgs = append(msgs, err.Error())
	}
	if _, err := SQLiteDSN(d); err != nil {
		msgs = append(msgs, err.Error())
	}
	return strings.Join(msgs, "\n")
}

// FuzzDSN: no error of Open, MySQLConfig or SQLiteDSN shows the password of the DSN, whatever
// its form (the SQL ones, and the forms a user may pass by mistake: keyword/value,
// go-sql-driver's own, no scheme) and whatever the password.
func FuzzDSN(f *testing.F) {
	forms := dsntest.Select("postgres", "mysql", "sqlite", "other")
	dsntest.Seed(forms, f.Add)
	f.Fuzz(func(t *testing.T, form uint8, user, pw string) {
		fm := forms[int(form)%len(forms)]
		if leak := dsntest.Leak(fm, user, pw, dsnErrors); leak != "" {
			d, _ := fm.Build(user, pw)
			t.Fatalf("%s: the errors for %q show %q:\n%s", fm.Name, d, leak, dsnErrors(d))
		}
	})
}
