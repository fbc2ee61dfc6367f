// Package dsntest builds DSNs of every form around a chosen user and password, for the fuzz
// and table tests that check no password reaches an error message (FuzzDSN in internal/dsn and
// in each backend). It is imported by tests only.
package dsntest

import (
	"net/url"
	"strings"
)

// Mask is Mask (this package cannot import the package it tests).
const Mask = "xxxxx"

// Form builds a DSN of one form around a user name and a password.
type Form struct {
	// Name says the form; it starts with the backend's scheme family ("postgres", "mysql",
	// "redis", "zk", "etcd", "sqlite") or "other".
	Name string
	// Build returns the DSN and the password as written in it (raw, percent-encoded or
	// quoted).
	Build func(user, pw string) (dsn, written string)
}

// The hosts are unreachable ports on the loopback interface: a constructor that does connect
// fails fast, and none of them contains '@' (the password's delimiter in every form).
func urlRaw(scheme, hosts, tail string) func(user, pw string) (string, string) {
	return func(user, pw string) (string, string) {
		return scheme + "://" + user + ":" + pw + "@" + hosts + tail, pw
	}
}

func urlEnc(scheme, hosts, tail string) func(user, pw string) (string, string) {
	return func(user, pw string) (string, string) {
		ui := url.UserPassword(user, pw).String()
		_, written, _ := strings.Cut(ui, ":")
		return scheme + "://" + ui + "@" + hosts + tail, written
	}
}

func query(prefix, key string) func(user, pw string) (string, string) {
	return func(user, pw string) (string, string) {
		written := url.QueryEscape(pw)
		return strings.ReplaceAll(prefix, "USER", url.QueryEscape(user)) + "&" + key + "=" + written + "&x=1", written
	}
}

// libpqQuote quotes a keyword/value value as libpq reads it.
func libpqQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// Forms are every DSN form a backend can be handed.
var Forms = []Form{
	{"postgres-url-raw", urlRaw("postgres", "127.0.0.1:1", "/db?sslmode=disable&connect_timeout=1")},
	{"postgres-url-encoded", urlEnc("postgresql", "127.0.0.1:1,127.0.0.1:2", "/db?sslmode=disable")},
	{"postgres-url-sslpassword", query("postgres://USER@127.0.0.1:1/db?sslmode=disable", "sslpassword")},
	{"postgres-url-password-param", query("postgresql://127.0.0.1:1/db?user=USER", "password")},
	{"postgres-keyword-value", func(user, pw string) (string, string) {
		w := libpqQuote(pw)
		return "host=127.0.0.1 port=1 user=" + libpqQuote(user) + " password=" + w + " dbname=db", w
	}},
	{"mysql-url-raw", urlRaw("mysql", "127.0.0.1:1", "/db?timeout=1s")},
	{"mysql-url-encoded", urlEnc("mysql", "127.0.0.1:1", "/db?parseTime=true")},
	{"mysql-native", func(user, pw string) (string, string) {
		return user + ":" + pw + "@tcp(127.0.0.1:1)/db?parseTime=true", pw
	}},
	{"redis-url-raw", urlRaw("redis", "127.0.0.1:1", "/0?dial_timeout=1s")},
	{"redis-url-encoded", urlEnc("redis", "127.0.0.1:1", "/0")},
	{"rediss-url-raw", urlRaw("rediss", "127.0.0.1:1", "")},
	{"rediss-url-encoded", urlEnc("rediss", "127.0.0.1:1", "/1?wait_replicas=1")},
	{"redis+cluster-url-raw", urlRaw("redis+cluster", "127.0.0.1:1,127.0.0.1:2", "/")},
	{"rediss+cluster-url-encoded", urlEnc("rediss+cluster", "127.0.0.1:1,127.0.0.1:2", "")},
	{"redis+sentinel-url-raw", urlRaw("redis+sentinel", "127.0.0.1:1", "/mymaster")},
	{"zk-url-raw", urlRaw("zk", "127.0.0.1:1,127.0.0.1:2", "/chroot?timeout=1s")},
	{"zk-url-encoded", urlEnc("zk", "127.0.0.1:1", "")},
	{"etcd-url-raw", urlRaw("etcd", "127.0.0.1:1,127.0.0.1:2", "/prefix?dial_timeout=1s")},
	{"etcd-url-encoded", urlEnc("etcd+tls", "127.0.0.1:1", "/p?servername=x")},
	{"sqlite-url-password-param", query("sqlite:///tmp/simba-fuzz-USER.db?_pragma=busy_timeout(1)", "password")},
	{"sqlite-file-auth-param", query("file:/tmp/simba-fuzz.db?_pragma=foreign_keys(1)&_auth_user=USER", "_auth_pass")},
	{"sqlite-url-pragma-key", func(user, pw string) (string, string) {
		w := url.QueryEscape("'" + pw + "'")
		return "sqlite:///tmp/simba-fuzz.db?_pragma=key(" + w + ")&mode=rwc", w
	}},
	{"other-no-scheme", func(user, pw string) (string, string) {
		return user + ":" + pw + "@127.0.0.1:1/db", pw
	}},
}

// Passwords are the seed passwords: every delimiter of every form, quotes, spaces, percent
// signs, unicode, the mask itself.
var Passwords = []string{
	"s3cr3tpw", "p@ss@word", "pa:ss:wd", "pa/ss/wd", "pa?ss=wd", "pa#sswd", "pa%zzwd", "pa%40wd",
	"pa ss wd", `pa'ss"wd\`, "pass&x=1", "pass;x=1", "pässwörd✓", "xxxxx", "xxxxxxxx",
	"@:/?#[]%", "password=x", "simba", "simbasimba", ")tcp(", "127.0.0.1", "p@ss/w?rd#:x'y z%",
}

// Users are the seed user names: plain, with delimiters, empty.
var Users = []string{"simba", "", "us/er?#x", "u@x", "u:x", "user name", "ü'ser"}

// Neutral is a password used to tell text the password happens to equal from text that comes
// from it.
const Neutral = "Nq7Zr0wK"

// Leak builds the DSN of form f around user and pw, lets render turn it into a message (a
// constructor's error, Redact's output), and returns which secret the message shows, or "".
// The secrets are pw and pw as written in the DSN, when at least 4 bytes long. A secret does
// not count as shown when it is not the password's doing: when it appears in the DSN built
// around Neutral instead of pw (it is part of the user, the host, ...), in the DSN with the
// password replaced by the mask (it overlaps its surroundings), or in the message render makes
// from the Neutral DSN (it is part of the message's own words).
func Leak(f Form, user, pw string, render func(dsn string) string) string {
	d, written := f.Build(user, pw)
	out := render(d)
	nd, _ := f.Build(user, Neutral)
	var nout *string
	for _, s := range []string{pw, written} {
		if len(s) < 4 || !strings.Contains(out, s) {
			continue
		}
		if strings.Contains(nd, s) || strings.Contains(strings.Replace(d, written, Mask, 1), s) {
			continue
		}
		if nout == nil {
			n := render(nd)
			nout = &n
		}
		if strings.Contains(*nout, s) {
			continue
		}
		return s
	}
	return ""
}

// Select returns the forms whose names start with one of prefixes (every form if none).
func Select(prefixes ...string) []Form {
	if len(prefixes) == 0 {
		return Forms
	}
	var out []Form
	for _, f := range Forms {
		for _, p := range prefixes {
			if strings.HasPrefix(f.Name, p) {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// Seed adds the seed corpus (each of forms with each seed user and password) to a fuzz target
// taking (form index into forms, user, password).
func Seed(forms []Form, add func(args ...any)) {
	for i := range forms {
		for _, u := range Users {
			for _, p := range Passwords {
				add(uint8(i), u, p)
			}
		}
	}
}
