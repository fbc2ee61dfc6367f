package simba

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/simba-go/simba/internal/engine"
)

// Every operation the client can report (each engine.Op) has its Op constant, named as the
// engine's transcripts name it, and every Op constant is listed in the docs of Event.Op and
// CallInfo.Op: a new operation fails here until it is documented.
func TestEveryOpIsDocumented(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	consts := make(map[string]string) // Op constant -> value
	docs := make(map[string]string)   // "Event.Op", "CallInfo.Op" -> doc
	for _, f := range pkgs["simba"].Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if !strings.HasPrefix(id.Name, "Op") || i >= len(n.Values) {
						continue
					}
					if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						consts[id.Name] = v
					}
				}
			case *ast.TypeSpec:
				st, ok := n.Type.(*ast.StructType)
				if !ok || (n.Name.Name != "Event" && n.Name.Name != "CallInfo") {
					return true
				}
				for _, fld := range st.Fields.List {
					for _, id := range fld.Names {
						if id.Name == "Op" {
							docs[n.Name.Name+".Op"] = fld.Doc.Text()
						}
					}
				}
			}
			return true
		})
	}
	if len(consts) == 0 || len(docs) != 2 {
		t.Fatalf("found Op constants %v and docs %v", consts, docs)
	}
	values := make(map[string]string) // value -> constant
	for name, v := range consts {
		values[v] = name
	}
	n := 0
	for op := engine.Op(1); !strings.HasPrefix(op.String(), "op("); op++ {
		n++
		got := publicOp(op)
		if got != op.String() {
			t.Errorf("engine op %v is reported as %q", op, got)
		}
		if _, ok := values[got]; !ok {
			t.Errorf("engine op %v (%q) has no Op constant", op, got)
		}
	}
	if n != len(consts) || n != len(publicOps)-1 {
		t.Errorf("%d engine ops, %d Op constants %v, %d in publicOps", n, len(consts), consts, len(publicOps)-1)
	}
	names := slices.Sorted(maps.Keys(consts))
	for field, doc := range docs {
		for _, name := range names {
			if !regexp.MustCompile(`\b` + name + `\b`).MatchString(doc) {
				t.Errorf("the doc of %s does not list %s: %q", field, name, doc)
			}
		}
	}
}
