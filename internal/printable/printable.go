// Package printable shows untrusted strings (owners, lease names, errors quoting what a backend
// stored) to people: the simba CLI and the HTTP status page escape them the same way, so a
// control or format character can neither drive a terminal nor reorder the text around it.
package printable

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with each control or format character (C0, DEL, C1, bidirectional
// overrides and isolates such as U+202E, zero-width characters) and each invalid byte replaced
// by its Go escape (\x1b, \u202e, \xff), everything else left as it is; s itself when there is
// nothing to escape.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (r != ' ' && !unicode.IsGraphic(r)) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r != ' ' && !unicode.IsGraphic(r):
			q := strconv.QuoteRuneToGraphic(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// Error returns err with its text escaped (Escape), for an error that quotes what a backend
// stored (a Redis script's error quoting a forged field); it unwraps to err, so errors.Is and
// errors.As see through it. nil stays nil, and an error with nothing to escape is returned as
// it is.
func Error(err error) error {
	if err == nil || Escape(err.Error()) == err.Error() {
		return err
	}
	return escapedError{err}
}

// escapedError is an error shown escaped (Error).
type escapedError struct{ err error }

func (e escapedError) Error() string { return Escape(e.err.Error()) }
func (e escapedError) Unwrap() error { return e.err }
