package gen

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
)

// int64Words are the words (in a Go identifier split at case changes and underscores, compared
// case-insensitively) that mark a value as a fencing token or a millisecond quantity.
var int64Words = map[string]bool{"token": true, "ms": true, "expiry": true, "remaining": true, "ttl": true}

// int64Types are the Go types such a value may have: int64 or a nullable int64.
var int64Types = map[string]bool{
	"int64": true, "*int64": true, "[]int64": true,
	"sql.NullInt64": true, "pgtype.Int8": true, "*pgtype.Int8": true,
}

// CheckInt64 parses every Go file under dir (the sqlc output, generated/sqlc) and fails if any
// struct field, function parameter or result, or variable whose name marks it as a token or a
// millisecond value (a word Token, Ms, Expiry, Remaining or TTL) is not an int64 or a nullable
// int64. sqlc infers int32 for bigint - bigint on PostgreSQL and MySQL; the spec casts, and this
// check catches a statement that forgets to. The error lists every offender as
// "file:line: <where> <name> is <type>, want int64".
func CheckInt64(dir string) error {
	var problems []string
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		problems = append(problems, checkInt64File(fset, f)...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("check-int64: %w", err)
	}
	if files == 0 {
		return fmt.Errorf("check-int64: no Go files under %s", dir)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return errors.New("check-int64: token and millisecond values must be int64:\n" + strings.Join(problems, "\n"))
	}
	return nil
}

func checkInt64File(fset *token.FileSet, f *ast.File) []string {
	var out []string
	report := func(pos token.Pos, where, name string, typ ast.Expr) {
		if !int64Name(name) {
			return
		}
		ts := typeString(typ)
		if ts == "" || int64Types[ts] {
			return
		}
		p := fset.Position(pos)
		out = append(out, fmt.Sprintf("%s:%d: %s %s is %s, want int64", p.Filename, p.Line, where, name, ts))
	}
	fields := func(where string, fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, fld := range fl.List {
			for _, n := range fld.Names {
				report(n.Pos(), where, n.Name, fld.Type)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeSpec:
			if st, ok := n.Type.(*ast.StructType); ok {
				fields("struct "+n.Name.Name+" field", st.Fields)
			}
		case *ast.FuncDecl:
			fields("func "+n.Name.Name+" parameter", n.Type.Params)
			fields("func "+n.Name.Name+" result", n.Type.Results)
		case *ast.ValueSpec:
			if n.Type != nil {
				for _, id := range n.Names {
					report(id.Pos(), "variable", id.Name, n.Type)
				}
			}
		}
		return true
	})
	return out
}

// int64Name reports whether an identifier names a token or millisecond value.
func int64Name(name string) bool {
	for _, w := range identWords(name) {
		if int64Words[strings.ToLower(w)] {
			return true
		}
	}
	return false
}

// identWords splits a Go identifier at underscores and case changes: "HolderRemainingMs" →
// Holder Remaining Ms; "TTLMs" → TTL Ms; "ttl_ms" → ttl ms.
func identWords(name string) []string {
	var words []string
	rs := []rune(name)
	start := 0
	flush := func(end int) {
		if end > start {
			words = append(words, string(rs[start:end]))
		}
		start = end
	}
	for i := 0; i < len(rs); i++ {
		switch {
		case rs[i] == '_':
			flush(i)
			start = i + 1
		case i > start && unicode.IsUpper(rs[i]) &&
			(unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))):
			flush(i)
		}
	}
	flush(len(rs))
	return words
}

// typeString renders a type expression as source ("int64", "sql.NullInt64", "[]int32"); ""
// for expressions the check does not judge (functions, maps, interfaces).
func typeString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		if x, ok := t.X.(*ast.Ident); ok {
			return x.Name + "." + t.Sel.Name
		}
	case *ast.StarExpr:
		if s := typeString(t.X); s != "" {
			return "*" + s
		}
	case *ast.ArrayType:
		if s := typeString(t.Elt); s != "" && t.Len == nil {
			return "[]" + s
		}
	case *ast.InterfaceType:
		return "interface{}"
	}
	return ""
}
