package open_test

import (
	"context"
	"testing"

	"github.com/simba-go/simba/open"

	"github.com/simba-go/simba/internal/dsn/dsntest"
)

// FuzzOpen: Open's error for a DSN of any form (every backend's, and forms no backend takes)
// around any user and password never shows the password. Open does no I/O here (no WithPing).
func FuzzOpen(f *testing.F) {
	forms := dsntest.Forms
	dsntest.Seed(forms, f.Add)
	f.Fuzz(func(t *testing.T, form uint8, user, pw string) {
		fm := forms[int(form)%len(forms)]
		render := func(d string) string {
			b, err := open.Open(context.Background(), d)
			if err != nil {
				return err.Error()
			}
			b.Close()
			return ""
		}
		if leak := dsntest.Leak(fm, user, pw, render); leak != "" {
			d, _ := fm.Build(user, pw)
			t.Fatalf("%s: Open(%q) = %q shows %q", fm.Name, d, render(d), leak)
		}
	})
}
