// Package dsn holds what every backend's DSN handling shares: hiding the credentials of a DSN
// in messages (Redact) and in the errors of the drivers' own DSN parsers (Scrub, ScrubError),
// and parsing the host-list form that ZooKeeper and etcd share (ParseHostList, TLSFiles).
//
// One function handles every form a caller may hand a backend, or hand it by mistake:
//
//	scheme://user:password@host,host/path?param=value   URL forms (postgres, mysql, redis, rediss,
//	                                                     redis+cluster, zk, sqlite, ...)
//	host=h user=u password='a b\'c' dbname=d            PostgreSQL keyword/value (libpq)
//	user:password@tcp(host:3306)/db?param=value         go-sql-driver/mysql's own form
//	file:/path.db?_pragma=...&password=...              SQLite paths with parameters
//	anything else                                       a DSN without a scheme
//
// Nothing is parsed the way a driver parses it: drivers disagree on where a password that
// contains '@', '/', '?' or ':' ends, so the rules below mask the union of every place a
// password can be, and over-redact rather than guess.
package dsn

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Mask replaces every credential Redact and Scrub hide.
const Mask = "xxxxx"

// Redact hides the credentials of a DSN of any form (see the package doc) for messages and
// logs, keeping the rest (user names, hosts, databases, other parameters) readable:
//
//   - the user information: everything from the first ':' after the scheme's "://" (or after
//     the start of a DSN without one) to the last '@' is masked, so a password may contain
//     any character, '@', ':', '/', '?' and '#' included, and the user name any but ':';
//   - every parameter named like a credential (password, pass, pwd, sslpassword, secret, token,
//     auth, apikey, sslkey, ...; in any case, percent-encoded or not) has its value masked,
//     whether it is a URL query parameter (the value ends at the next '&'), a keyword/value
//     pair (quoted with '...' and backslash escapes, or ending at the next unescaped space; an
//     unterminated quote masks the rest of the string), a ';'-separated pair or the argument
//     of a SQLite pragma (_pragma=key('secret')).
//
// "postgres://u:secret@h/db" becomes "postgres://u:xxxxx@h/db", "host=h password='a b'"
// becomes "host=h password=xxxxx". A DSN without any of these is returned unchanged. The rules
// over-redact rather than guess: "postgres://h:5432/db?application_name=a@b" (an '@' after a
// ':' that is not a password's) becomes "postgres://h:xxxxx@b", as no rule can tell it from a
// password "5432/db?application_name=a" that a driver would read.
func Redact(dsn string) string {
	spans := credentialSpans(dsn)
	if len(spans) == 0 {
		return dsn
	}
	var b strings.Builder
	b.Grow(len(dsn))
	prev := 0
	for _, s := range spans {
		b.WriteString(dsn[prev:s.from])
		b.WriteString(Mask)
		prev = s.to
	}
	b.WriteString(dsn[prev:])
	return b.String()
}

// Scrub makes a message about dsn (typically a driver's parse error) safe to show: every
// occurrence of dsn itself is replaced by Redact(dsn), and every credential Redact would mask
// (as written in the DSN, percent-decoded and unquoted) by Mask. ok is false when the message
// still shows a part of a credential (4 bytes or more of one, e.g. a driver that split the
// password at an unencoded '@' and quotes half of it): the message must then not be shown.
// A part that the redacted DSN shows anyway (the password "redispass" shares "redi" with
// "redis://", "postgres" with the user postgres) tells nothing the error's quoted DSN does not,
// and does not count: go-redis's "redis: invalid database number" was withheld for it.
func Scrub(msg, dsn string) (scrubbed string, ok bool) {
	redacted := Redact(dsn)
	if dsn != "" {
		msg = strings.ReplaceAll(msg, dsn, redacted)
	}
	secrets := Secrets(dsn)
	for _, s := range secrets {
		if len(s) >= 3 {
			msg = strings.ReplaceAll(msg, s, Mask)
		}
	}
	for _, s := range secrets {
		for i := 0; i+4 <= len(s); i++ {
			w := s[i : i+4]
			if strings.Trim(w, "x") == "" || strings.Contains(redacted, w) {
				continue // the mask itself, or shown by the redacted DSN anyway
			}
			if strings.Contains(msg, w) {
				return "", false
			}
		}
	}
	return msg, true
}

// Secrets returns what Redact masks in dsn, as written and decoded (percent-decoded, libpq
// quotes and backslash escapes removed), longest first, without duplicates.
func Secrets(dsn string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	addAll := func(raw string) {
		forms := []string{raw}
		if v, err := url.PathUnescape(raw); err == nil {
			forms = append(forms, v)
		}
		if v, err := url.QueryUnescape(raw); err == nil {
			forms = append(forms, v)
		}
		for _, f := range forms {
			add(f)
			add(unquote(f))
		}
	}
	for _, s := range rawSpans(dsn) {
		addAll(dsn[s.from:s.to])
	}
	for _, s := range credentialSpans(dsn) {
		addAll(dsn[s.from:s.to])
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// ScrubError turns a driver's error about dsn into one safe to show and to wrap: its message
// is Scrub's, or, when Scrub cannot make it safe, a generic one. The driver's error is not
// kept in the chain (errors.Unwrap would hand its message, credentials and all, to whoever
// logs it): callers wrap the result with their own sentinel (spi.ErrInvalidOption).
func ScrubError(err error, dsn string) error {
	if err == nil {
		return nil
	}
	if msg, ok := Scrub(err.Error(), dsn); ok {
		return errors.New(msg)
	}
	return errWithheld
}

const withheld = "the parser's message is withheld: it quotes part of the credentials"

var errWithheld = errors.New(withheld)

// Errorf returns the error of a bad DSN, `<sentinel>: <what> "<Redact(dsn)>": <detail>`, where
// detail is fmt.Sprintf(format, args...) passed through Scrub (withheld when Scrub cannot make
// it safe). It matches sentinel with errors.Is and wraps nothing else: an argument that is a
// driver's error is quoted scrubbed, never kept in the chain.
func Errorf(sentinel error, what, dsn, format string, args ...any) error {
	detail, ok := Scrub(fmt.Sprintf(format, args...), dsn)
	if !ok {
		detail = withheld
	}
	return fmt.Errorf("%w: %s %q: %s", sentinel, what, Redact(dsn), detail)
}

// span is a byte range [from, to) of a DSN.
type span struct{ from, to int }

// credentialSpans returns the merged, sorted spans Redact masks.
func credentialSpans(dsn string) []span {
	spans := rawSpans(dsn)
	if len(spans) == 0 {
		return nil
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	merged := spans[:1]
	for _, s := range spans[1:] {
		last := &merged[len(merged)-1]
		if s.from <= last.to {
			last.to = max(last.to, s.to)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// rawSpans returns every span to mask, unmerged: the user information's password and every
// credential parameter's value.
func rawSpans(dsn string) []span {
	var spans []span
	base := 0
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && ValidScheme(scheme) {
		base = len(scheme) + 3
	}
	rest := dsn[base:]
	if at := strings.LastIndexByte(rest, '@'); at > 0 {
		if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 && colon+1 < at {
			spans = append(spans, span{base + colon + 1, base + at})
		}
	}
	return append(spans, paramSpans(dsn)...)
}

// ValidScheme reports whether s is an RFC 3986 scheme (ALPHA *( ALPHA / DIGIT / "+" / "-" /
// "." )). What precedes "://" in a string that is not a URL may be part of a password
// ("user:pa://ss@host"): messages quote a scheme only when it is valid.
func ValidScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '.' || c == '%'
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// paramSpans finds every key=value whose key names a credential and returns the spans of the
// values. A key is a maximal run of key bytes; what precedes it decides how its value ends.
func paramSpans(s string) []span {
	var spans []span
	for i := 0; i < len(s); i++ {
		if !isKeyByte(s[i]) || (i > 0 && isKeyByte(s[i-1])) {
			continue
		}
		j := i
		for j < len(s) && isKeyByte(s[j]) {
			j++
		}
		key := s[i:j]
		var prev byte = ' '
		if i > 0 {
			prev = s[i-1]
		}
		query := prev == '?' || prev == '&'
		if !query {
			for j < len(s) && isSpace(s[j]) {
				j++
			}
		}
		if j >= len(s) || (s[j] != '=' && s[j] != '(') || !credentialKey(key) {
			continue
		}
		v := j + 1
		var end int
		switch {
		case s[j] == '(': // a pragma: _pragma=key('secret')
			end = indexFrom(s, v, ")")
		case query:
			end = indexFrom(s, v, "&")
		case prev == ';':
			end = indexFrom(s, v, ";")
		default: // keyword/value: optional spaces, then a quoted or an unquoted value
			for v < len(s) && isSpace(s[v]) {
				v++
			}
			end = valueEnd(s, v)
		}
		if end > v {
			spans = append(spans, span{v, end})
		}
		i = max(i, end-1)
	}
	return spans
}

// indexFrom returns the index of the first byte of any of chars in s at or after from, or
// len(s).
func indexFrom(s string, from int, chars string) int {
	if i := strings.IndexAny(s[from:], chars); i >= 0 {
		return from + i
	}
	return len(s)
}

// valueEnd returns the end of a keyword/value value starting at v: a '...' or "..." string
// (backslash escapes; unterminated: the end of s) or a run up to an unescaped space.
func valueEnd(s string, v int) int {
	if v >= len(s) {
		return v
	}
	if q := s[v]; q == '\'' || q == '"' {
		for k := v + 1; k < len(s); k++ {
			switch s[k] {
			case '\\':
				k++
			case q:
				return k + 1
			}
		}
		return len(s)
	}
	k := v
	for ; k < len(s) && !isSpace(s[k]); k++ {
		if s[k] == '\\' {
			k++
		}
	}
	return min(k, len(s))
}

// credentialKey reports whether a parameter name (any case, percent-encoded or not, with or
// without '_', '-' or '.') names a credential.
func credentialKey(key string) bool {
	if k, err := url.QueryUnescape(key); err == nil {
		key = k
	}
	key = strings.ToLower(key)
	key = strings.NewReplacer("_", "", "-", "", ".", "").Replace(key)
	for _, w := range []string{"pass", "pwd", "secret", "token", "auth", "cred", "private"} {
		if strings.Contains(key, w) {
			return true
		}
	}
	return strings.HasSuffix(key, "key") // key, apikey, sslkey, accesskey; not foreign_keys
}

// unquote strips libpq quoting: surrounding quotes and backslash escapes.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		s = s[1 : len(s)-1]
	}
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
