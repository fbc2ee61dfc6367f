package dsn

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/simba-go/simba/internal/dsn/dsntest"
)

// TestRedact: every DSN form, with the exact redacted output.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// URL forms.
		{"postgres://u:secret@host:5432/db?sslmode=disable", "postgres://u:xxxxx@host:5432/db?sslmode=disable"},
		{"postgresql://u:secret@h1:5432,h2:5433/db", "postgresql://u:xxxxx@h1:5432,h2:5433/db"},
		{"postgres://u@host/db", "postgres://u@host/db"},
		{"postgres://host/db", "postgres://host/db"},
		{"postgres://u:p@ss:w/rd?#x@host/db", "postgres://u:xxxxx@host/db"},
		{"postgres://us/er?#x:pw@host/db", "postgres://us/er?#x:xxxxx@host/db"},
		{"postgres://u@h/db?sslpassword=k3y&sslmode=verify-full", "postgres://u@h/db?sslpassword=xxxxx&sslmode=verify-full"},
		{"postgres://u@h/db?Pass%77ord=s3&x=1", "postgres://u@h/db?Pass%77ord=xxxxx&x=1"},
		{"postgres://h/db?password=p@ss&x=1", "postgres://h/db?password=xxxxx&x=1"},
		{"mysql://root:p/ss@tcp(h:3306)/db", "mysql://root:xxxxx@tcp(h:3306)/db"},
		{"mysql://app:p%40ss@db:3306/simba?tls=true", "mysql://app:xxxxx@db:3306/simba?tls=true"},
		{"redis://:onlypass@host:6380/0", "redis://:xxxxx@host:6380/0"},
		{"rediss://:onlypass@host:6380/0", "rediss://:xxxxx@host:6380/0"},
		{"redis+cluster://app:se@cret@h1:7001,h2:7002/", "redis+cluster://app:xxxxx@h1:7001,h2:7002/"},
		{"rediss+cluster://app:pw@h1:7001?addr=h2:7002", "rediss+cluster://app:xxxxx@h1:7001?addr=h2:7002"},
		{"redis+sentinel://u:pw@h:26379/mymaster", "redis+sentinel://u:xxxxx@h:26379/mymaster"},
		{"redis://u@h", "redis://u@h"},
		{"redis://h/?q=a@b", "redis://h/?q=a@b"},
		{"zk://simba:pw@h1:2181,h2:2181/chroot?timeout=5s", "zk://simba:xxxxx@h1:2181,h2:2181/chroot?timeout=5s"},
		{"sqlite:///tmp/a@b.db", "sqlite:///tmp/a@b.db"},
		{"sqlite://simba.db", "sqlite://simba.db"},
		{"sqlite:///x.db?_pragma=key('s3cr3t')&_pragma=busy_timeout(1)", "sqlite:///x.db?_pragma=key(xxxxx)&_pragma=busy_timeout(1)"},
		{"sqlite:///x.db?_pragma=busy_timeout(1)&password=s3cr3t&mode=rwc", "sqlite:///x.db?_pragma=busy_timeout(1)&password=xxxxx&mode=rwc"},
		// SQLite file: paths.
		{"file:/x.db?_pragma=foreign_keys(1)&_auth_pass=s3cr3t", "file:/x.db?_pragma=foreign_keys(1)&_auth_pass=xxxxx"},
		{"file:/x.db?token=t0k3n", "file:/x.db?token=xxxxx"},
		// PostgreSQL keyword/value.
		{"host=h user=u password=secret dbname=d", "host=h user=u password=xxxxx dbname=d"},
		{`host=h password='a b\'c' dbname=d`, "host=h password=xxxxx dbname=d"},
		{`host=h password = 'a b' sslpassword=x\ y user=u`, "host=h password = xxxxx sslpassword=xxxxx user=u"},
		{`host=h password='unterminated dbname=d`, "host=h password=xxxxx"},
		{"host=h user=u dbname=d", "host=h user=u dbname=d"},
		// go-sql-driver/mysql's own form.
		{"user:pass@tcp(host:3306)/db?parseTime=true", "user:xxxxx@tcp(host:3306)/db?parseTime=true"},
		{"us.er!:p:a@s/s@tcp(host:3306)/db", "us.er!:xxxxx@tcp(host:3306)/db"},
		{"root@tcp(127.0.0.1:3306)/test", "root@tcp(127.0.0.1:3306)/test"},
		// Other strings without a scheme.
		{"no scheme at all", "no scheme at all"},
		{"localhost:5432", "localhost:5432"},
		{"u:secret@localhost", "u:xxxxx@localhost"},
		{"Server=h;Password=a b;Database=d", "Server=h;Password=xxxxx;Database=d"},
		{"", ""},
	} {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestScrub(t *testing.T) {
	dsn := "postgres://u:p%40ssw0rd@h/db?sslpassword=k3yk3y"
	for _, c := range []struct {
		msg, want string
		ok        bool
	}{
		{"cannot parse " + dsn + ": bad", "cannot parse postgres://u:xxxxx@h/db?sslpassword=xxxxx: bad", true},
		{"password p@ssw0rd rejected", "password xxxxx rejected", true},
		{"key k3yk3y rejected", "key xxxxx rejected", true},
		{"invalid port \"ssw0\"", "", false}, // a fragment of the password
		{"invalid sslmode", "invalid sslmode", true},
	} {
		got, ok := Scrub(c.msg, dsn)
		if got != c.want || ok != c.ok {
			t.Errorf("Scrub(%q) = %q, %v; want %q, %v", c.msg, got, ok, c.want, c.ok)
		}
	}
	err := ScrubError(fmt.Errorf("driver: %q is bad", "ssw0rd"), dsn)
	if err == nil || strings.Contains(err.Error(), "ssw0") || errors.Unwrap(err) != nil {
		t.Errorf("ScrubError = %v (unwraps to %v), want a withheld message without a cause", err, errors.Unwrap(err))
	}
	// A part of the password that the redacted DSN shows anyway does not withhold a message.
	for _, c := range []struct{ msg, dsn string }{
		{`redis: invalid database number: "abc"`, "redis://default:redispass@localhost:6379/abc"},
		{`invalid port "x" for postgres host`, "postgres://postgres:postgres1@h:x/db"},
	} {
		if got, ok := Scrub(c.msg, c.dsn); !ok || got != c.msg {
			t.Errorf("Scrub(%q, %q) = %q, %v; want the message as it is", c.msg, c.dsn, got, ok)
		}
	}
	if _, ok := Scrub(`bad "dispa"`, "redis://default:redispass@localhost:6379/abc"); ok {
		t.Error(`Scrub shows "dispa", a part of the password "redispass" the redacted DSN does not show`)
	}
	if ScrubError(nil, dsn) != nil {
		t.Error("ScrubError(nil) != nil")
	}
}

// FuzzDSN: for DSNs of every form around a random user and password, neither Redact's output
// nor a driver message scrubbed with ScrubError shows the password.
func FuzzDSN(f *testing.F) {
	forms := dsntest.Forms
	dsntest.Seed(forms, f.Add)
	f.Fuzz(func(t *testing.T, form uint8, user, pw string) {
		fm := forms[int(form)%len(forms)]
		if leak := dsntest.Leak(fm, user, pw, Redact); leak != "" {
			d, _ := fm.Build(user, pw)
			t.Fatalf("%s: Redact(%q) = %q shows %q", fm.Name, d, Redact(d), leak)
		}
		_, written := fm.Build(user, pw)
		driver := func(d string) string {
			// What drivers do: quote the DSN, the password as written, decoded, and halves of it.
			msg := fmt.Sprintf("cannot parse %s: bad password %q (%s, %s) near %q", d, written, pw, strings.ToUpper(d), pw[len(pw)/2:])
			return ScrubError(errors.New(msg), d).Error()
		}
		if leak := dsntest.Leak(fm, user, pw, driver); leak != "" {
			d, _ := fm.Build(user, pw)
			t.Fatalf("%s: ScrubError(message about %q) = %q shows %q", fm.Name, d, driver(d), leak)
		}
	})
}

func TestMaskIsDsntestMask(t *testing.T) {
	if Mask != dsntest.Mask {
		t.Fatalf("dsn.Mask %q != dsntest.Mask %q", Mask, dsntest.Mask)
	}
}

func TestErrorf(t *testing.T) {
	sentinel := errors.New("bad option")
	d := "redis://u:s3cr3tpw@h:6379/x"
	err := Errorf(sentinel, "redis DSN", d, "bad database %q: %v", "x", errors.New("near s3cr3tpw@h"))
	if !errors.Is(err, sentinel) {
		t.Errorf("%v does not match the sentinel", err)
	}
	if want := `bad option: redis DSN "redis://u:xxxxx@h:6379/x": bad database "x": near xxxxx@h`; err.Error() != want {
		t.Errorf("Errorf = %q, want %q", err, want)
	}
	err = Errorf(sentinel, "redis DSN", d, "bad host %q", "s3cr3")
	if strings.Contains(err.Error(), "s3cr3") || !errors.Is(err, sentinel) {
		t.Errorf("Errorf with a fragment of the password = %q", err)
	}
}
