package gen

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckInt64(t *testing.T) {
	if err := CheckInt64("testdata/int64/good"); err != nil {
		t.Errorf("good fixture: %v", err)
	}
	err := CheckInt64("testdata/int64/bad")
	if err == nil {
		t.Fatal("bad fixture passed")
	}
	for _, want := range []string{
		"queries.go:9: struct AcquireRow field RemainingMs is int32, want int64",
		"queries.go:15: struct OpenSessionParams field TtlMs is interface{}, want int64",
		"queries.go:19: variable remaining_ms is int32, want int64",
		"queries.go:23: func Release parameter token is int, want int64",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "want int64"); n != 4 {
		t.Errorf("%d problems reported, want 4:\n%v", n, err)
	}
	if err := CheckInt64("testdata/int64/nonexistent"); err == nil {
		t.Error("a missing directory passed")
	}
}

// TestCheckInt64Repository: the repository's committed sqlc output passes.
func TestCheckInt64Repository(t *testing.T) {
	if err := CheckInt64("../generated/sqlc"); err != nil {
		t.Fatal(err)
	}
}

func TestIdentWords(t *testing.T) {
	for in, want := range map[string][]string{
		"HolderRemainingMs": {"Holder", "Remaining", "Ms"},
		"TTLMs":             {"TTL", "Ms"},
		"ttl_ms":            {"ttl", "ms"},
		"Items":             {"Items"},
		"HolderID":          {"Holder", "ID"},
		"token":             {"token"},
	} {
		if got := identWords(in); !slices.Equal(got, want) {
			t.Errorf("identWords(%q) = %q, want %q", in, got, want)
		}
	}
}
