package wiretest

import (
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/simba-go/simba/generated/wire"
)

// TestValidateOwner: owners are 1..MaxOwnerLen bytes of UTF-8 without control, format or
// line-separator characters, so no owner can carry a NUL to a driver or an escape sequence to a
// terminal, nor display as another owner. The format and separator cases (U+202E, U+200B,
// U+FEFF, U+2028...) passed before spec/names.yaml's owner.refused_categories: this test failed
// on that rule (unicode.IsControl alone).
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
		// Format characters (Cf): text that displays as something else.
		{"admin\u202Egnp.exe", false},        // RIGHT-TO-LEFT OVERRIDE: shows "adminexe.png"
		{"root\u200B", false},                // ZERO WIDTH SPACE: looks like "root"
		{"\uFEFFworker", false},              // BYTE ORDER MARK
		{"a\u2066b\u2069", false},            // bidirectional isolates
		{"soft\u00ADhyphen", false},          // SOFT HYPHEN
		{"tag\U000E0041", false},             // TAG LATIN CAPITAL LETTER A
		{"line\u2028separator", false},       // Zl: breaks a log line
		{"para\u2029separator", false},       // Zp
		{"literal \uFFFD replacement", true}, // U+FFFD written out is valid UTF-8 and a symbol
		{"nbsp\u00A0space", true},            // a space (Zs), shown as one
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

// TestValidateOwnerNamesTheCharacter: the error names the first offending character's byte
// offset and code point (the byte's value for invalid UTF-8), so an operator finds an invisible
// character without a hex dump. Before owner.refused_categories the format-character cases
// passed and the invalid-UTF-8 message named no position: this test failed on that rule.
func TestValidateOwnerNamesTheCharacter(t *testing.T) {
	for owner, want := range map[string]string{
		"admin\u202Egnp": "format character (Cf U+202E) at byte 5",
		"ab\u200B":       "format character (Cf U+200B) at byte 2",
		"\uFEFFw":        "format character (Cf U+FEFF) at byte 0",
		"é\x1b[2J":       "control character (Cc U+001B) at byte 2",
		"x\u2028":        "line separator (Zl U+2028) at byte 1",
		"ok\xffbad":      "byte 2 is 0xff",
		"café\xc3":       "byte 5 is 0xc3",
		"\u202E\x00":     "(Cf U+202E) at byte 0", // the first offender, not the worst
		"a\u2029\u200Bz": "paragraph separator (Zp U+2029) at byte 1",
	} {
		err := wire.ValidateOwner(owner)
		if !errors.Is(err, wire.ErrInvalidOwner) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateOwner(%+q) = %v, want ErrInvalidOwner naming %q", owner, err, want)
		}
	}
}

// TestOwnerRefusesMatchesValidateOwner: OwnerRefuses, which code that makes an owner from a host
// name uses, refuses exactly the characters ValidateOwner refuses.
func TestOwnerRefusesMatchesValidateOwner(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // surrogates do not encode as UTF-8
		}
		refused := wire.ValidateOwner("a"+string(r)) != nil
		if refused != wire.OwnerRefuses(r) {
			t.Fatalf("%U: ValidateOwner refuses it %v, OwnerRefuses %v", r, refused, wire.OwnerRefuses(r))
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
