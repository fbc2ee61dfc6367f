package foreign

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// TestMembersDropsForeignEntriesAndWarnsOnce: entries that are not client session ids are
// dropped (the others keep their order), each is warned about once per group, and a long entry
// is shortened in the log.
func TestMembersDropsForeignEntriesAndWarnsOnce(t *testing.T) {
	var buf bytes.Buffer
	f := New(slog.New(slog.NewTextHandler(&buf, nil)), "test")
	good := []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"}
	if got := Members(f, "g", good); &got[0] != &good[0] {
		t.Fatal("a clean list was copied")
	}
	long := strings.Repeat("x", 500)
	in := []string{"bad", good[1], "0123456789ABCDEF0123456789ABCDEF", good[0], long}
	for range 3 {
		if got := Members(f, "g", in); !slices.Equal(got, []string{good[1], good[0]}) {
			t.Fatalf("Members = %q", got)
		}
	}
	Members(f, "h", []string{"bad"})
	out := buf.String()
	if n := strings.Count(out, "level=WARN"); n != 4 {
		t.Fatalf("%d warnings, want 4 (three entries of g, one of h):\n%s", n, out)
	}
	if strings.Contains(out, long) || !strings.Contains(out, strings.Repeat("x", maxShown)+"...") {
		t.Fatalf("long entry not shortened:\n%s", out)
	}
}
