// Package gen turns Simba's declarative wire spec (the spec/ directory) into every backend's
// artifacts: SQL migrations and sqlc queries per dialect, Lua scripts, the ZooKeeper layout, and
// Go under generated/ (name validation, assignment weights, key and path builders, typed Lua
// wrappers, the etcd transactions' compare and operation lists).
//
// The generator is a library: Generate returns the files, sorted and byte-for-byte
// deterministic, and Write / Diff apply or check them. cmd/simbagen is the thin command that
// `go generate` runs; its -verify flag fails on any difference, stale leftovers included.
//
// The spec is split by concern, one part per file group (names, assignment, sql, redis, zk, etcd);
// each part validates its own input and reports errors as *SpecError naming file, field and
// what is wrong.
package gen

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// File is one generated artifact: a slash-separated path relative to the repository root and
// its exact contents.
type File struct {
	Path string
	Data []byte
}

// SpecError is a problem in the spec, located by file and field.
type SpecError struct {
	File  string // path relative to the spec directory
	Field string // dotted path of the offending field, e.g. "operations.acquire.variants.mysql"
	Msg   string
}

// Error renders the error on one line: "spec/sql.yaml: operations.acquire: missing variant for mysql".
func (e *SpecError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("spec/%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("spec/%s: %s: %s", e.File, e.Field, e.Msg)
}

func specErr(file, field, format string, args ...any) *SpecError {
	return &SpecError{File: file, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// OwnedDirs are the directories (relative to the repository root) whose contents the generator
// owns entirely: any file in them that Generate does not produce is stale and is removed by
// Write and reported by Diff. generated/sqlc is owned by sqlc, which runs after simbagen.
var OwnedDirs = []string{
	"generated/wire",
	"generated/luascripts",
	"generated/etcdtxn",
	"sql",
	"lua",
	"zk",
}

// part generates the artifacts of one concern of the spec.
type part struct {
	name string
	gen  func(specDir string) ([]File, error)
}

// parts are run in this order; the order does not affect the output, which is sorted by path.
var parts = []part{
	{"names", genNames},
	{"assign", genAssign},
	{"sql", genSQL},
	{"redis", genRedis},
	{"zk", genZK},
	{"etcd", genEtcd},
}

// Generate loads and validates the spec in specDir and returns every artifact, sorted by path.
// It reads nothing but specDir and writes nothing.
func Generate(specDir string) ([]File, error) {
	var out []File
	var errs []error
	for _, p := range parts {
		files, err := p.gen(specDir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, files...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	for i := 1; i < len(out); i++ {
		if out[i].Path == out[i-1].Path {
			return nil, fmt.Errorf("gen: two parts generate %s", out[i].Path)
		}
	}
	for _, f := range out {
		if !owned(f.Path) {
			return nil, fmt.Errorf("gen: %s lies outside the generator's owned directories", f.Path)
		}
	}
	return out, nil
}

func owned(path string) bool {
	for _, d := range OwnedDirs {
		if strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// Write writes files under root, creating directories, and removes every other file in the
// owned directories. Files whose contents are unchanged are not rewritten.
func Write(root string, files []File) error {
	want, err := writeChanged(root, files)
	if err != nil {
		return err
	}
	stale, err := existing(root)
	if err != nil {
		return err
	}
	for _, p := range stale {
		if !want[p] {
			if err := os.Remove(filepath.Join(root, filepath.FromSlash(p))); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeChanged writes the files whose contents differ from what is under root, creating
// directories, and returns the set of paths written or kept.
func writeChanged(root string, files []File) (map[string]bool, error) {
	want := make(map[string]bool, len(files))
	for _, f := range files {
		want[f.Path] = true
		full := filepath.Join(root, filepath.FromSlash(f.Path))
		if old, err := os.ReadFile(full); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, f.Data, 0o644); err != nil {
			return nil, err
		}
	}
	return want, nil
}

// Diff compares files with what is under root and lists every difference: missing, changed and
// stale (present in an owned directory but not generated) files. An empty result means root is
// up to date.
func Diff(root string, files []File) ([]string, error) {
	var diffs []string
	want := make(map[string]bool, len(files))
	for _, f := range files {
		want[f.Path] = true
		old, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.Path)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			diffs = append(diffs, "missing: "+f.Path)
		case err != nil:
			return nil, err
		case !bytes.Equal(old, f.Data):
			diffs = append(diffs, "changed: "+f.Path)
		}
	}
	have, err := existing(root)
	if err != nil {
		return nil, err
	}
	for _, p := range have {
		if !want[p] {
			diffs = append(diffs, "stale: "+p)
		}
	}
	slices.Sort(diffs)
	return diffs, nil
}

// existing lists the files currently in the owned directories, slash-separated and relative to
// root.
func existing(root string) ([]string, error) {
	var out []string
	for _, d := range OwnedDirs {
		dir := filepath.Join(root, filepath.FromSlash(d))
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if e.IsDir() {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}
