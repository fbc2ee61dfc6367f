package open

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba/internal/dsn/dsntest"
)

// TestCheckError: a failed check's error is one line, names the redacted DSN once, masks every
// credential the backend's message repeats, keeps the backend's error in the chain, and when
// the message shows a part of a credential that cannot be masked, withholds the message and
// keeps only the error's class.
func TestCheckError(t *testing.T) {
	const dsn = "postgres://u:hunter2xyz@h:5432/db"
	cause := spi.Unavailable("sql postgres open session", errors.New("failed to connect:\n\th:5432: refused\n\th:5432: refused\nretry"))
	err := checkError(cause, dsn)
	want := `simba: backend unavailable: sql postgres open session: failed to connect: h:5432: refused; retry (DSN "postgres://u:xxxxx@h:5432/db")`
	if err.Error() != want {
		t.Errorf("checkError = %q\nwant %q", err, want)
	}
	if !errors.Is(err, cause) || !errors.Is(err, spi.ErrUnavailable) {
		t.Errorf("checkError dropped the cause from the chain: %v", err)
	}

	// The whole password is masked; the DSN already quoted is not quoted again.
	err = checkError(spi.AsPermanent(errors.New(`auth "hunter2xyz" refused for postgres://u:xxxxx@h:5432/db`)), dsn)
	if msg := err.Error(); strings.Contains(msg, "hunter2") || strings.Count(msg, "h:5432/db") != 1 || spi.Classify(err) != spi.Permanent {
		t.Errorf("checkError = %q (class %v)", msg, spi.Classify(err))
	}

	// A part of the password that Scrub cannot mask: the message is withheld, the class kept.
	for _, c := range []error{
		spi.Unavailable("dial", errors.New("bad host hunter2 in list")),
		spi.AsPermanent(errors.New("password starting hunter2 refused")),
		spi.AccessDenied("open session", "", errors.New("password starting hunter2 refused")),
	} {
		err = checkError(c, dsn)
		msg := err.Error()
		if strings.Contains(msg, "hunt") || !strings.Contains(msg, "withheld") || !strings.Contains(msg, "postgres://u:xxxxx@h:5432/db") {
			t.Errorf("checkError(%q) = %q, want the message withheld and the DSN named", c, msg)
		}
		if errors.Is(err, spi.ErrUnavailable) != errors.Is(c, spi.ErrUnavailable) || spi.Classify(err) != spi.Classify(c) ||
			errors.Is(err, spi.ErrAccessDenied) != errors.Is(c, spi.ErrAccessDenied) {
			t.Errorf("checkError(%q) = %v: class changed", c, err)
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			if strings.Contains(e.Error(), "hunt") {
				t.Errorf("checkError(%q) keeps the credential in its chain: %q", c, e)
			}
		}
	}
}

// FuzzCheckError: a failed check's error never shows the password, whatever the backend's
// message quotes of the DSN (the DSN, the password as written and decoded, half of it).
func FuzzCheckError(f *testing.F) {
	forms := dsntest.Forms
	dsntest.Seed(forms, f.Add)
	f.Fuzz(func(t *testing.T, form uint8, user, pw string) {
		fm := forms[int(form)%len(forms)]
		_, written := fm.Build(user, pw)
		render := func(d string) string {
			msg := fmt.Sprintf("connect %s:\n\tauth %q (%s) failed near %q", d, written, pw, pw[len(pw)/2:])
			return checkError(spi.Unavailable("open session", errors.New(msg)), d).Error()
		}
		if leak := dsntest.Leak(fm, user, pw, render); leak != "" {
			d, _ := fm.Build(user, pw)
			t.Fatalf("%s: checkError(message about %q) = %q shows %q", fm.Name, d, render(d), leak)
		}
	})
}
