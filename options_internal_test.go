package simba

import (
	"errors"
	"strings"
	"testing"

	"github.com/simba-go/simba/generated/wire"
)

// TestDefaultOwnerIsValid: the default owner host:pid is a valid owner whatever the host
// name: control, format and line-separator characters and invalid UTF-8 are replaced and a long
// host name is cut at a rune boundary so the whole fits wire.MaxOwnerLen. The format and
// separator hosts failed before defaultOwner used wire.OwnerRefuses (unicode.IsControl only).
func TestDefaultOwnerIsValid(t *testing.T) {
	for _, host := range []string{
		"", "db-1", "evil\x1b[2J", "nul\x00host", "bad\xff\xfeutf8", "tab\there", "del\x7f", "c1\u0085",
		"rtl\u202Eevil", "zw\u200Bsp", "\uFEFFbom", "ls\u2028", strings.Repeat("\u200B", 200),
		strings.Repeat("h", 1000), strings.Repeat("é", 200), strings.Repeat("界", 100),
	} {
		owner := defaultOwner(host, 4194304)
		if err := wire.ValidateOwner(owner); err != nil {
			t.Errorf("defaultOwner(%q) = %q: %v", host, owner, err)
		}
		if !strings.HasSuffix(owner, ":4194304") {
			t.Errorf("defaultOwner(%q) = %q lost the pid", host, owner)
		}
	}
	if got := defaultOwner("db-1", 42); got != "db-1:42" {
		t.Errorf("defaultOwner(db-1, 42) = %q, want db-1:42", got)
	}
	if err := wire.ValidateOwner(defaultConfig().owner); err != nil {
		t.Errorf("this host's default owner %q: %v", defaultConfig().owner, err)
	}
}

// TestWithOwnerValidates: WithOwner applies wire.ValidateOwner; its errors match both
// ErrInvalidOption and wire.ErrInvalidOwner.
func TestWithOwnerValidates(t *testing.T) {
	for _, owner := range []string{"", "a\x00b", "\x1b[2J", "a\xff", "a\nb", "a\u202Eb", "\u200B", strings.Repeat("o", wire.MaxOwnerLen+1)} {
		var c config
		err := WithOwner(owner).apply(&c)
		if !errors.Is(err, ErrInvalidOption) || !errors.Is(err, ErrInvalidOwner) {
			t.Errorf("WithOwner(%q) = %v, want ErrInvalidOption and wire.ErrInvalidOwner", owner, err)
		}
	}
	for _, owner := range []string{"a", "web-1:4242", "ünïcode ok", strings.Repeat("o", wire.MaxOwnerLen)} {
		var c config
		if err := WithOwner(owner).apply(&c); err != nil || c.owner != owner {
			t.Errorf("WithOwner(%q) = %v, owner %q", owner, err, c.owner)
		}
	}
}
