package resource

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
)

// TestFencedWrites: on every kind of resource the harness uses, a write is accepted when its
// token is at least the highest accepted for the name, rejected (not an error) when lower,
// names are fenced apart, and Drop removes the data and the run's fence records, so a new
// run's first write with a low token is accepted again.
func TestFencedWrites(t *testing.T) {
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	specs := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string {
			return "own|sqlite|file:" + filepath.Join(t.TempDir(), "f.db") + "?_pragma=busy_timeout(5000)|chaos_fence"
		},
		"postgres": func(t *testing.T) string { return "pg|pgx|" + testenv.Postgres(t) + "|chaos_fence_test_" + run },
		"mariadb": func(t *testing.T) string {
			return "own|mysql|" + testenv.MySQL(t) + "?clientFoundRows=true|chaos_fence_test_" + run
		},
		"redis": func(t *testing.T) string { return "redis|redis|" + testenv.Redis(t) + "|simba-chaos-test:" + run + ":" },
	}
	for kind, spec := range specs {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := Open(spec(t))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.Setup(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Drop(context.Background()) })
			for _, c := range []struct {
				name string
				tok  int64
				want bool
			}{{"x", 5, true}, {"x", 5, true}, {"x", 7, true}, {"x", 6, false}, {"y", 1, true}, {"x", 8, true}, {"y", 0, false}} {
				got, err := r.Write(ctx, c.name, c.tok, "w")
				if err != nil || got != c.want {
					t.Fatalf("write %s %d: %v, %v; want %v", c.name, c.tok, got, err, c.want)
				}
			}
			if err := r.Drop(ctx); err != nil {
				t.Fatal(err)
			}
			if err := r.Setup(ctx); err != nil {
				t.Fatal(err)
			}
			if got, err := r.Write(ctx, "x", 1, "w"); err != nil || !got {
				t.Fatalf("after Drop, write x 1: %v, %v; want accepted (the fence record should be gone)", got, err)
			}
		})
	}
}
