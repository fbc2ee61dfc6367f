package printable

import "testing"

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
