package gen

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/fixture/golden")

const (
	fixtureSpec   = "testdata/fixture/spec"
	fixtureGolden = "testdata/fixture/golden"
)

// TestGolden generates the fixture spec and compares every artifact with its golden copy.
// Run `go test -update` to rewrite the golden files after an intended change.
func TestGolden(t *testing.T) {
	files, err := Generate(fixtureSpec)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.RemoveAll(fixtureGolden); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			p := filepath.Join(fixtureGolden, filepath.FromSlash(f.Path)) + ".golden"
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]bool{}
	for _, f := range files {
		want[f.Path] = true
		golden, err := os.ReadFile(filepath.Join(fixtureGolden, filepath.FromSlash(f.Path)) + ".golden")
		if err != nil {
			t.Errorf("%s: no golden file (run go test -update): %v", f.Path, err)
			continue
		}
		if !bytes.Equal(golden, f.Data) {
			t.Errorf("%s differs from its golden file (run go test -update if intended)", f.Path)
		}
	}
	_ = filepath.WalkDir(fixtureGolden, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(fixtureGolden, p)
		if !want[strings.TrimSuffix(filepath.ToSlash(rel), ".golden")] {
			t.Errorf("stale golden file %s", rel)
		}
		return nil
	})
}

// TestDeterministic: two runs give identical output.
func TestDeterministic(t *testing.T) {
	a, err := Generate(fixtureSpec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(fixtureSpec)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Path != b[i].Path || !bytes.Equal(a[i].Data, b[i].Data) {
			t.Fatalf("run 2 differs at %s", a[i].Path)
		}
	}
}

// TestRepositoryUpToDate: the repository's own artifacts match its spec (what make verify checks).
func TestRepositoryUpToDate(t *testing.T) {
	files, err := Generate("../spec")
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := Diff("..", files)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("out of date (run go generate ./...):\n%s", strings.Join(diffs, "\n"))
	}
}

// mutate copies the fixture spec to a temporary directory with one replacement applied to one
// file, failing the test if old does not occur exactly once.
func mutate(t *testing.T, file, old, new string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(fixtureSpec, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fixtureSpec, p)
		dst := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if filepath.ToSlash(rel) == file {
			if n := strings.Count(string(data), old); n != 1 {
				t.Fatalf("%s: %q occurs %d times, want once", file, old, n)
			}
			data = []byte(strings.Replace(string(data), old, new, 1))
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// brokenSpecCases: each mutation of the fixture must fail with a one-line error naming the
// place. Parts add their own cases here.
var brokenSpecCases = []struct {
	name, file, old, new string
	wantErr              string // substring of the error
}{
	{"name too long", "names.yaml", "max_length: 128", "max_length: 300", "spec/names.yaml: name.max_length: must be in"},
	{"bad alphabet range", "names.yaml", `["A-Z", "a-z"`, `["A-Z", "z-a"`, "spec/names.yaml: name.alphabet[1]"},
	{"slash allowed", "names.yaml", `"_"`, `"/"`, `spec/names.yaml: name.alphabet: '/' cannot be allowed`},
	{"unknown field", "names.yaml", "case_sensitive: true", "case_sensitive: true\n  colour: red", "spec/names.yaml: "},
	{"wrong vector", "assign.yaml", "weight: 961102844131960919", "weight: 961102844131960918", "spec/assign.yaml: weight_vectors[0]: weight(0, \"a\") is 961102844131960919"},
	{"wrong owner", "assign.yaml", `owner: "b"`, `owner: "a"`, "spec/assign.yaml: owner_vectors[2]"},
	{"bad type", "assign.yaml", "final_shift: 31", "final_shift: thirty-one", "spec/assign.yaml: "},
}

func TestBrokenSpec(t *testing.T) {
	for _, c := range brokenSpecCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Generate(mutate(t, c.file, c.old, c.new))
			if err == nil {
				t.Fatal("Generate succeeded on a broken spec")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			if !strings.Contains(msg, c.wantErr) {
				t.Errorf("error %q does not contain %q", msg, c.wantErr)
			}
		})
	}
}

// dependentCases: changing one detail of the spec changes exactly the listed artifacts. Parts
// add their own cases here.
var dependentCases = []struct {
	name, file, old, new string
	changed              []string
}{
	{"separator", "names.yaml", `separator: "."`, `separator: ":"`, []string{"generated/wire/names.go"}},
	{"vector", "assign.yaml", `{partition: 1000, members: ["x", "a"], owner: "x"}`, `{partition: 1000, members: ["a", "x"], owner: "x"}`, []string{"generated/wire/assign_vectors_test.go"}},
}

func TestOneDetailChangesOnlyItsDependents(t *testing.T) {
	base, err := Generate(fixtureSpec)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range dependentCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Generate(mutate(t, c.file, c.old, c.new))
			if err != nil {
				t.Fatal(err)
			}
			before := map[string][]byte{}
			for _, f := range base {
				before[f.Path] = f.Data
			}
			var changed []string
			for _, f := range got {
				if old, ok := before[f.Path]; !ok || !bytes.Equal(old, f.Data) {
					changed = append(changed, f.Path)
				}
				delete(before, f.Path)
			}
			for p := range before {
				changed = append(changed, p)
			}
			slices.Sort(changed)
			if !slices.Equal(changed, c.changed) {
				t.Errorf("changed %q, want %q", changed, c.changed)
			}
		})
	}
}
