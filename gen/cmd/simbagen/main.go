// Command simbagen generates Simba's wire artifacts from spec/ (see package gen).
//
//	simbagen -root .           # write every artifact, removing stale ones
//	simbagen -root . -verify   # fail, listing each difference, if anything is out of date
//	simbagen -check-int64 dir  # fail if sqlc's output under dir has a token or ms value that is not int64
//	simbagen -root . -sqlq     # after sqlc: the neutral queries interface and the dialect adapters
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/simba-go/simba/gen"
)

func main() {
	root := flag.String("root", ".", "repository root (spec/ is read from here, artifacts written here)")
	verify := flag.Bool("verify", false, "write nothing; exit 1 if any artifact differs from the spec")
	checkInt64 := flag.String("check-int64", "", "only check that every token and millisecond value in the Go files under this directory is int64")
	sqlq := flag.Bool("sqlq", false, "after sqlc: write generated/sqlq (one queries interface, an adapter per dialect) and the batch queue functions from the spec and sqlc's output")
	flag.Parse()
	if *sqlq {
		files, err := gen.GenerateSQLQ(*root)
		if err == nil {
			err = gen.WriteSQLQ(*root, files)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "simbagen:", err)
			os.Exit(1)
		}
		return
	}
	if *checkInt64 != "" {
		if err := gen.CheckInt64(*checkInt64); err != nil {
			fmt.Fprintln(os.Stderr, "simbagen:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*root, *verify); err != nil {
		fmt.Fprintln(os.Stderr, "simbagen:", err)
		os.Exit(1)
	}
}

func run(root string, verify bool) error {
	files, err := gen.Generate(filepath.Join(root, "spec"))
	if err != nil {
		return err
	}
	if !verify {
		if err := gen.Write(root, files); err != nil {
			return err
		}
		// sqlc (run next by go generate) rewrites generated/sqlc but never deletes: drop the
		// outputs of statements the spec no longer has.
		_, err := gen.PruneSQLC(root)
		return err
	}
	diffs, err := gen.Diff(root, files)
	if err != nil {
		return err
	}
	if len(diffs) > 0 {
		for _, d := range diffs {
			fmt.Fprintln(os.Stderr, d)
		}
		return fmt.Errorf("%d generated files are out of date; run go generate ./...", len(diffs))
	}
	return nil
}
