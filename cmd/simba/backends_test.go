package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/simba-go/simba"
)

// TestUnknownSchemeNamed: the CLI opens backends with open.Open, so an unknown scheme is an
// ErrInvalidOption that names it and lists the schemes (redis+sentinel:// included), without
// the password.
func TestUnknownSchemeNamed(t *testing.T) {
	err := status(context.Background(), []string{"-dsn", "foo://u:s3cr3tpw@h"})
	if !errors.Is(err, simba.ErrInvalidOption) {
		t.Fatalf("simba status -dsn foo://... = %v, want ErrInvalidOption", err)
	}
	msg := err.Error()
	for _, want := range []string{`unknown scheme "foo"`, "redis+sentinel://", "zk://"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "s3cr3tpw") {
		t.Errorf("error shows the password: %q", msg)
	}
}
