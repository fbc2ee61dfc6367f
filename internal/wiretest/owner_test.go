package wiretest

import (
	"errors"
	"strings"
	"testing"

	"github.com/simba-go/simba/generated/wire"
)

// TestValidateOwner: owners are 1..MaxOwnerLen bytes of UTF-8 without control characters, so no
// owner can carry a NUL to a driver or an escape sequence to a terminal.
func TestValidateOwner(t *testing.T) {
	for _, c := range []struct {
		owner string
		ok    bool
	}{
		{"host:1234", true},
		{"worker-7 (eu-west, café ☕)", true},
		{strings.Repeat("a", wire.MaxOwnerLen), true},
		{strings.Repeat("é", wire.MaxOwnerLen/2), true},
		{"", false},
		{strings.Repeat("a", wire.MaxOwnerLen+1), false},
		{"nul\x00inside", false},
		{"\x1b[2J\x1b[31mroot", false}, // terminal escape
		{"bell\a", false},
		{"tab\there", false},
		{"line\nbreak", false},
		{"del\x7f", false},
		{"c1\u0085next-line", false},
		{"csi\u009b31m", false},
		{"bad utf8 \xff\xfe", false},
		{"\xc3", false}, // truncated sequence
	} {
		err := wire.ValidateOwner(c.owner)
		if (err == nil) != c.ok {
			t.Errorf("ValidateOwner(%+q) = %v, want ok=%v", c.owner, err, c.ok)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, wire.ErrInvalidOwner) {
			t.Errorf("ValidateOwner(%+q) = %v, not ErrInvalidOwner", c.owner, err)
		}
		// The message quotes the owner escaped: no raw control byte reaches a terminal or log.
		for _, r := range err.Error() {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0xfffd {
				t.Errorf("ValidateOwner(%+q) message %q carries raw %U", c.owner, err, r)
			}
		}
	}
}

func TestSessionIDForms(t *testing.T) {
	for _, c := range []struct {
		id         string
		client, zk bool
	}{
		{"0123456789abcdef0123456789abcdef", true, false},
		{"0123456789abcdef", false, true},
		{"0123456789ABCDEF0123456789ABCDEF", false, false}, // upper case is not what clients make
		{"0123456789abcdef0123456789abcde", false, false},
		{"0123456789abcdef0123456789abcdeg", false, false},
		{"", false, false},
		{"garbage", false, false},
		{"0123456789abcde\x00", false, false},
	} {
		if got := wire.IsClientSessionID(c.id); got != c.client {
			t.Errorf("IsClientSessionID(%q) = %v", c.id, got)
		}
		if got := wire.IsZooKeeperSessionID(c.id); got != c.zk {
			t.Errorf("IsZooKeeperSessionID(%q) = %v", c.id, got)
		}
	}
}
