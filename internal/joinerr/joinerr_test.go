package joinerr_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/simba-go/simba/internal/joinerr"
)

type codeError struct{ code int }

func (e *codeError) Error() string { return "code" }

func TestJoin(t *testing.T) {
	if err := joinerr.Join(); err != nil {
		t.Errorf("Join() = %v", err)
	}
	if err := joinerr.Join(nil, nil); err != nil {
		t.Errorf("Join(nil, nil) = %v", err)
	}
	if err := joinerr.Join(nil, io.EOF, nil); err != io.EOF {
		t.Errorf("Join(nil, EOF, nil) = %v, want EOF itself", err)
	}
	ce := &codeError{7}
	err := joinerr.Join(context.DeadlineExceeded, nil, errors.Join(io.EOF, ce))
	if got, want := err.Error(), "context deadline exceeded; EOF\ncode"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	err = joinerr.Join(context.DeadlineExceeded, io.EOF, ce)
	if got, want := err.Error(), "context deadline exceeded; EOF; code"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	var as *codeError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, io.EOF) || !errors.As(err, &as) || as.code != 7 {
		t.Errorf("errors.Is/As do not find the joined errors in %v", err)
	}
}

// TestJoinRepeatsNoText: errors with the same text (parallel calls that all timed out) are
// shown once, and errors.Is still finds each of them.
func TestJoinRepeatsNoText(t *testing.T) {
	closed := errors.New("zk: connection closed")
	err := joinerr.Join(context.DeadlineExceeded, nil, context.DeadlineExceeded, closed, context.DeadlineExceeded, closed)
	if got, want := err.Error(), "context deadline exceeded; zk: connection closed"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, closed) {
		t.Errorf("errors.Is does not find the joined errors in %v", err)
	}
	if got, want := joinerr.Join(io.EOF, io.EOF).Error(), "EOF"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
}
