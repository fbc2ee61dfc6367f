// Package joinerr joins errors as errors.Join does, but on one line and without repeats: an
// error that joins a context's error with a backend's, or the errors of several calls made in
// parallel (which often fail alike: "context deadline exceeded" from each), stays one short
// log line.
package joinerr

import "strings"

// Join returns an error that wraps the non-nil errs, so that errors.Is and errors.As find
// each of them; its text is theirs joined with "; ", each distinct text once (in the order
// they first came). It returns nil when every err is nil, and the one non-nil err itself when
// there is only one.
func Join(errs ...error) error {
	n := 0
	var last error
	for _, err := range errs {
		if err != nil {
			n++
			last = err
		}
	}
	switch n {
	case 0:
		return nil
	case 1:
		return last
	}
	j := &joined{errs: make([]error, 0, n)}
	for _, err := range errs {
		if err != nil {
			j.errs = append(j.errs, err)
		}
	}
	return j
}

type joined struct{ errs []error }

func (j *joined) Error() string {
	var b strings.Builder
	seen := make(map[string]bool, len(j.errs))
	for _, err := range j.errs {
		msg := err.Error()
		if seen[msg] {
			continue
		}
		seen[msg] = true
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(msg)
	}
	return b.String()
}

func (j *joined) Unwrap() []error { return j.errs }
