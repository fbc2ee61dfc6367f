package resource

import (
	"context"
	"path/filepath"
	"testing"
)

func TestSQLiteFenceRejectsLowerTokens(t *testing.T) {
	ctx := context.Background()
	r, err := Open("own|sqlite|file:" + filepath.Join(t.TempDir(), "f.db") + "|chaos_fence")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tok  int64
		want bool
	}{{5, true}, {5, true}, {7, true}, {6, false}, {8, true}} {
		got, err := r.Write(ctx, "x", c.tok, "w")
		if err != nil || got != c.want {
			t.Fatalf("write %d: %v, %v; want %v", c.tok, got, err, c.want)
		}
	}
}
