// Package wiretest checks the generated wire package (generated/wire) against the wire rules of
// DESIGN.md §5. It lives outside generated/ because the generator owns that directory.
package wiretest

import (
	"errors"
	"strings"
	"testing"

	"github.com/simba-go/simba/generated/wire"
)

func TestValidateNameEdgeCases(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"", false},
		{"a", true},
		{strings.Repeat("a", 127), true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{strings.Repeat("é", 64), false}, // 128 bytes, but not ASCII
		{"A", true},
		{"Z9", true},
		{"0", true},
		{"a.b", true},
		{"a_b", true},
		{"a:b", true},
		{"a-b", true},
		{"._:-", true},
		{"...", true},
		{".a", true},
		{".", false},  // not a ZooKeeper node
		{"..", false}, // not a ZooKeeper node
		{"a b", false},
		{" a", false},
		{"a\t", false},
		{"a\n", false},
		{"a/b", false}, // ZooKeeper path separator
		{"{a}", false}, // Redis hash tag braces
		{"a{", false},
		{"a}", false},
		{"a*", false},
		{"a?", false},
		{"a@b", false},
		{"a#b", false},
		{"a%b", false},
		{"a\x00b", false},
		{"ü", false},
		{"名前", false},
		{"emoji😀", false},
		{"a,b", false},
		{"a'b", false},
		{"a\"b", false},
		{"a\\b", false},
	} {
		err := wire.ValidateName(c.name)
		if (err == nil) != c.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !errors.Is(err, wire.ErrInvalidName) {
			t.Errorf("ValidateName(%q) error %v does not match ErrInvalidName", c.name, err)
		}
	}
}

// Names are case-sensitive: "a" and "A" are two valid, distinct names (backends compare
// bytewise); the validator never folds case.
func TestNamesAreCaseSensitive(t *testing.T) {
	if wire.ValidateName("lease") != nil || wire.ValidateName("LEASE") != nil {
		t.Fatal("both cases must be valid")
	}
	if wire.LeaseKey("lease") == wire.LeaseKey("LEASE") || wire.LeasePath("lease") == wire.LeasePath("LEASE") {
		t.Fatal("keys or paths fold case")
	}
}

func TestPartitionNames(t *testing.T) {
	if got := wire.PartitionName("orders", 7); got != "orders.7" {
		t.Fatalf("PartitionName = %q", got)
	}
	for _, c := range []struct {
		name  string
		group string
		p     int
		ok    bool
	}{
		{"orders.7", "orders", 7, true},
		{"a.b.0", "a.b", 0, true},
		{"orders.07", "", 0, false},
		{"orders.", "", 0, false},
		{".7", "", 0, false},
		{"orders.-1", "", 0, false},
		{"orders.x", "", 0, false},
		{"orders", "", 0, false},
		{"orders.65536", "", 0, false},
		{"orders.65535", "orders", 65535, true},
	} {
		g, p, ok := wire.ParsePartition(c.name)
		if ok != c.ok || g != c.group || p != c.p {
			t.Errorf("ParsePartition(%q) = %q, %d, %v; want %q, %d, %v", c.name, g, p, ok, c.group, c.p, c.ok)
		}
	}
	for _, c := range []struct {
		groupLen, partitions int
		ok                   bool
	}{
		{126, 10, true},  // "ggg….9" is 128 bytes
		{126, 11, false}, // "ggg….10" is 129 bytes
		{127, 1, false},  // "ggg….0" is 129 bytes
		{1, wire.MaxPartitions, true},
	} {
		err := wire.ValidateGroup(strings.Repeat("g", c.groupLen), c.partitions)
		if (err == nil) != c.ok {
			t.Errorf("ValidateGroup(%d bytes, %d partitions) = %v, want ok=%v", c.groupLen, c.partitions, err, c.ok)
		}
	}
	for _, n := range []int{0, -1, wire.MaxPartitions + 1} {
		if err := wire.ValidateGroup("g", n); !errors.Is(err, wire.ErrInvalidName) {
			t.Errorf("ValidateGroup(g, %d) = %v, want ErrInvalidName", n, err)
		}
	}
}

// FuzzValidateName: the validator never panics, accepts exactly the grammar, and every
// accepted name builds keys and paths that round-trip.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"", "a", ".", "..", "a.b", "{x}", "a/b", strings.Repeat("z", 128), "名前"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := wire.ValidateName(name)
		want := len(name) >= 1 && len(name) <= 128 && name != "." && name != ".."
		for i := 0; i < len(name) && want; i++ {
			c := name[i]
			want = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:-", c) >= 0
		}
		if (err == nil) != want {
			t.Fatalf("ValidateName(%q) = %v, grammar says ok=%v", name, err, want)
		}
		if err != nil {
			return
		}
		if g, ok := wire.ParseLeaseKey(wire.LeaseKey(name)); !ok || g != name {
			t.Fatalf("LeaseKey(%q) does not round-trip: %q %v", name, g, ok)
		}
		if !strings.HasSuffix(wire.LeasePath(name), "/"+name) {
			t.Fatalf("LeasePath(%q) = %q", name, wire.LeasePath(name))
		}
	})
}
