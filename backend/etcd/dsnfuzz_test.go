package etcd

import (
	"testing"

	"github.com/simba-go/simba/internal/dsn/dsntest"
)

// dsnError returns the error message of ParseDSN for d ("" if none). It does no I/O.
func dsnError(d string) string {
	if _, err := ParseDSN(d); err != nil {
		return err.Error()
	}
	return ""
}

// FuzzDSN: no error of ParseDSN shows the password of the DSN, whatever its form (etcd://, and
// the forms a user may pass by mistake) and whatever the password.
func FuzzDSN(f *testing.F) {
	forms := dsntest.Select("etcd", "other", "postgres-keyword", "redis-url-raw")
	dsntest.Seed(forms, f.Add)
	f.Fuzz(func(t *testing.T, form uint8, user, pw string) {
		fm := forms[int(form)%len(forms)]
		if leak := dsntest.Leak(fm, user, pw, dsnError); leak != "" {
			d, _ := fm.Build(user, pw)
			t.Fatalf("%s: the error for %q shows %q: %s", fm.Name, d, leak, dsnError(d))
		}
	})
}
