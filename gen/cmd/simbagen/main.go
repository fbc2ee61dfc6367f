// Command simbagen generates Simba's wire artifacts from spec/ (see package gen).
//
//	simbagen -root .           # write every artifact, removing stale ones
//	simbagen -root . -verify   # fail, listing each difference, if anything is out of date
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
	flag.Parse()
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
		return gen.Write(root, files)
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
