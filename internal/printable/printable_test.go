package printable

import (
	"errors"
	"fmt"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"node-a", "node-a"},
		{"with space and ünïcode", "with space and ünïcode"},
		{"node-a\u202e<evil>", `node-a\u202e<evil>`},
		{"esc\x1b[31mred", `esc\x1b[31mred`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"line\nbreak\ttab", `line\nbreak\ttab`},
		{"", ""},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestError: Error shows an error's text escaped and unwraps to it.
func TestError(t *testing.T) {
	if Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
	clean := errors.New("clean")
	if Error(clean) != clean {
		t.Error("an error with nothing to escape is not returned as it is")
	}
	raw := fmt.Errorf("token %s: %w", "\x1b[2J", clean)
	got := Error(raw)
	if got.Error() != `token \x1b[2J: clean` || !errors.Is(got, clean) || errors.Unwrap(got) != raw {
		t.Errorf("Error(%q) = %q (Is clean %v)", raw, got, errors.Is(got, clean))
	}
}
