package gen

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
)

// The adapters step runs after sqlc: it reads sqlc's output (generated/sqlc/<dialect>) and
// writes one neutral queries interface for every dialect (generated/sqlq: a method per
// statement with dialect-free parameter and row types, the operation state the backend's
// interpreter fills, an executor per statement and a recording wrapper), one adapter per
// dialect over sqlc's package, and, for a dialect whose operations are declared batch, the
// functions that queue sqlc's statements on one pgx.Batch (generated/sqlc/<dialect>/simba_queue.go,
// in sqlc's package so that they use its query constants and row types).
//
// They are not sqlc's own batch output: sqlc's :batchexec/:batchmany/:batchone methods (v1.31,
// tools/go.mod) each queue one statement with many parameter sets and send their own batch, so
// an operation of several different statements (keep-alive: renew, held, members) would cost a
// round trip per statement, or a handle that intercepts their SendBatch. A queue function is
// the same per-statement typed code for one batch the caller sends: sqlc's statement text and
// row struct, scanned field by field in the order sqlc declares (and itself scans) them.

const (
	sqlqDir = "generated/sqlq"
	sqlqPkg = "github.com/simba-go/simba/generated/sqlq"
	// sqlcQueueFile is the file the adapters step writes into a batch dialect's sqlc package.
	sqlcQueueFile = "simba_queue.go"
)

// sqlcField is a parameter or row field of a sqlc method: its Go name and type.
type sqlcField struct{ Name, Type string }

// sqlcMethod is one method of a sqlc package's Queries.
type sqlcMethod struct {
	Name string
	// Params are the parameters after ctx as the method declares them (names as written).
	Params []sqlcField
	// ParamStruct is the name of the params struct when the method takes one (arg XParams).
	ParamStruct string
	// Fields are the neutral parameters: the params struct's fields, or the scalar parameters
	// with exported names.
	Fields []sqlcField
	// Returns is exec, one or many.
	Returns string
	// Elem is the returned type (one) or element type (many), as sqlc names it.
	Elem string
	// ElemFields are Elem's fields when it is a struct of the package; nil for a scalar.
	ElemFields []sqlcField
	// Const and Args are the query constant and the argument expressions of the call the method
	// makes (for the batch queue functions).
	Const string
	Args  []string
}

// sqlcPackage is what the adapters step reads of one dialect's sqlc output.
type sqlcPackage struct {
	methods map[string]*sqlcMethod
	structs map[string][]sqlcField
}

// parseSQLC reads the Go files of one sqlc output directory (simbagen's own queue file aside).
func parseSQLC(dir string) (*sqlcPackage, error) {
	p := &sqlcPackage{methods: map[string]*sqlcMethod{}, structs: map[string][]sqlcField{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	type fn struct {
		decl *ast.FuncDecl
		src  []byte
	}
	var fns []fn
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || e.Name() == sqlcQueueFile {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, e.Name(), src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					ts, ok := sp.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					var fields []sqlcField
					for _, fl := range st.Fields.List {
						for _, n := range fl.Names {
							fields = append(fields, sqlcField{n.Name, typeString(fl.Type)})
						}
					}
					p.structs[ts.Name.Name] = fields
				}
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 && typeString(d.Recv.List[0].Type) == "*Queries" && d.Name.Name != "WithTx" {
					fns = append(fns, fn{d, src})
				}
			}
		}
	}
	for _, f := range fns {
		m := &sqlcMethod{Name: f.decl.Name.Name}
		params := f.decl.Type.Params.List
		for _, fl := range params[1:] { // ctx first
			for _, n := range fl.Names {
				m.Params = append(m.Params, sqlcField{n.Name, typeString(fl.Type)})
			}
		}
		res := f.decl.Type.Results.List
		switch len(res) {
		case 1:
			m.Returns = "exec"
		case 2:
			t := typeString(res[0].Type)
			if strings.HasPrefix(t, "[]") {
				m.Returns, m.Elem = "many", t[2:]
			} else {
				m.Returns, m.Elem = "one", t
			}
		default:
			return nil, fmt.Errorf("%s: %s returns %d values", dir, m.Name, len(res))
		}
		ast.Inspect(f.decl.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || m.Const != "" || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || typeString(sel.X) != "q.db" {
				return true
			}
			if id, ok := call.Args[1].(*ast.Ident); ok {
				m.Const = id.Name
			}
			for _, a := range call.Args[2:] {
				m.Args = append(m.Args, string(f.src[fset.Position(a.Pos()).Offset:fset.Position(a.End()).Offset]))
			}
			return true
		})
		p.methods[m.Name] = m
	}
	for _, m := range p.methods {
		if len(m.Params) == 1 && strings.HasSuffix(m.Params[0].Type, "Params") {
			m.ParamStruct = m.Params[0].Type
			m.Fields = p.structs[m.ParamStruct]
		} else {
			for _, f := range m.Params {
				m.Fields = append(m.Fields, sqlcField{exportName(f.Name), f.Type})
			}
		}
		if fields, ok := p.structs[m.Elem]; ok {
			m.ElemFields = fields
		}
	}
	return p, nil
}

// exportName turns a sqlc parameter name (sessionID, id, groupNames) into the field name sqlc
// gives the same parameter in a params struct (SessionID, ID, GroupNames).
func exportName(s string) string {
	if s == "id" {
		return "ID"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// sqlqNeutralType reports whether a sqlc type can be carried as it is by the neutral interface
// (a predeclared type or a slice of one).
func sqlqNeutralType(t string) bool {
	t = strings.TrimPrefix(t, "[]")
	return t != "" && !strings.ContainsAny(t, ".*[]")
}

// sqlqStatement is one statement of the neutral interface.
type sqlqStatement struct {
	Name     string // sqlc name
	Doc      string
	Dialects []string
	Returns  string
	Fields   []sqlcField // neutral parameters
	Scalar   string      // the row type when it is a scalar
	Row      []sqlcField // the row's fields when it is a struct
	// Per dialect: the sqlc method.
	Methods map[string]*sqlcMethod
}

// RowType is the neutral type of one returned row.
func (s *sqlqStatement) RowType() string {
	if s.Row != nil {
		return s.Name + "Row"
	}
	return s.Scalar
}

// Result is the neutral method's first result type (empty for exec).
func (s *sqlqStatement) Result() string {
	switch s.Returns {
	case "one":
		return s.RowType()
	case "many":
		return "[]" + s.RowType()
	}
	return ""
}

// sqlqDialect is one dialect's adapter.
type sqlqDialect struct {
	Name, Go string
	Pgx      bool
	// Batch lists the statements queued in a batch on this dialect (of its batch and pipeline
	// operations).
	Batch []*sqlqStatement
}

// GenerateSQLQ returns the artifacts of the adapters step: it loads the spec under root/spec
// and sqlc's output under root/generated/sqlc. go generate runs it after sqlc.
func GenerateSQLQ(root string) ([]File, error) {
	s, err := LoadSQL(filepath.Join(root, "spec"))
	if err != nil {
		return nil, err
	}
	pkgs := map[string]*sqlcPackage{}
	for _, d := range sqlDialects {
		if pkgs[d], err = parseSQLC(filepath.Join(root, "generated", "sqlc", d)); err != nil {
			return nil, fmt.Errorf("sqlq: %w", err)
		}
	}
	var stmts []*sqlqStatement
	args := map[string]string{} // neutral parameter → type
	var argOrder []string
	for _, st := range s.Statements {
		q := &sqlqStatement{Name: camel(st.Name), Doc: strings.Join(strings.Fields(st.Doc), " "), Dialects: st.Dialects, Returns: st.Returns, Methods: map[string]*sqlcMethod{}}
		for i, d := range st.Dialects {
			m := pkgs[d].methods[q.Name]
			if m == nil {
				return nil, fmt.Errorf("sqlq: generated/sqlc/%s has no method %s (run sqlc first)", d, q.Name)
			}
			if m.Returns != st.Returns {
				return nil, fmt.Errorf("sqlq: %s.%s returns %s, the spec says %s", d, q.Name, m.Returns, st.Returns)
			}
			q.Methods[d] = m
			row := m.ElemFields
			for _, f := range append(slices.Clone(m.Fields), row...) {
				if !sqlqNeutralType(f.Type) {
					return nil, fmt.Errorf("sqlq: %s.%s: %s has type %s, which the neutral interface cannot carry", d, q.Name, f.Name, f.Type)
				}
			}
			if m.Returns != "exec" && row == nil && !sqlqNeutralType(m.Elem) {
				return nil, fmt.Errorf("sqlq: %s.%s returns %s, which the neutral interface cannot carry", d, q.Name, m.Elem)
			}
			if i == 0 {
				q.Row, q.Fields = row, slices.Clone(m.Fields)
				if row == nil {
					q.Scalar = m.Elem
				}
				continue
			}
			if !slices.Equal(q.Row, row) || (row == nil && q.Scalar != m.Elem) {
				return nil, fmt.Errorf("sqlq: %s returns different rows on %s and %s", q.Name, st.Dialects[0], d)
			}
			for _, f := range m.Fields {
				j := slices.IndexFunc(q.Fields, func(g sqlcField) bool { return g.Name == f.Name })
				switch {
				case j < 0:
					q.Fields = append(q.Fields, f)
				case q.Fields[j].Type != f.Type:
					return nil, fmt.Errorf("sqlq: %s parameter %s is %s on %s and %s elsewhere", q.Name, f.Name, f.Type, d, q.Fields[j].Type)
				}
			}
		}
		for _, f := range q.Fields {
			if t, ok := args[f.Name]; ok && t != f.Type {
				return nil, fmt.Errorf("sqlq: parameter %s is %s in %s and %s elsewhere", f.Name, f.Type, q.Name, t)
			} else if !ok {
				args[f.Name] = f.Type
				argOrder = append(argOrder, f.Name)
			}
		}
		stmts = append(stmts, q)
	}
	byName := map[string]*sqlqStatement{}
	for _, q := range stmts {
		byName[q.Name] = q
	}
	// The spec's parameter names for If, mapped to the Args fields.
	ifs := map[string]string{}
	for _, op := range s.Operations {
		for _, e := range op.Statements {
			if e.If == "" {
				continue
			}
			want := strings.ReplaceAll(e.If, "_", "")
			for _, a := range argOrder {
				if strings.EqualFold(a, want) {
					ifs[e.If] = a
				}
			}
			if ifs[e.If] == "" {
				return nil, fmt.Errorf("sqlq: operations.%s: if %q names no parameter of the generated statements", op.Name, e.If)
			}
		}
	}
	var dialects []*sqlqDialect
	for _, d := range sqlDialects {
		sd := &sqlqDialect{Name: d, Go: sqlDialectGo(d), Pgx: s.Dialects[d].SQLPackage == "pgx/v5"}
		for _, op := range s.Operations {
			if !slices.Contains(op.Batch, d) && !slices.Contains(op.Pipeline, d) {
				continue
			}
			for _, e := range s.stepEntries(op, d) {
				if q := byName[camel(e.Name)]; !slices.Contains(sd.Batch, q) {
					sd.Batch = append(sd.Batch, q)
				}
			}
		}
		dialects = append(dialects, sd)
	}
	var argFields []sqlcField
	for _, a := range argOrder {
		argFields = append(argFields, sqlcField{a, args[a]})
	}
	var ifList [][2]string
	for _, k := range sqlSortedKeys(ifs) {
		ifList = append(ifList, [2]string{k, ifs[k]})
	}
	data := map[string]any{"Stmts": stmts, "Args": argFields, "Ifs": ifList, "Dialects": dialects}
	var files []File
	add := func(path, tmpl string, data any) error {
		var b bytes.Buffer
		if err := sqlqTemplates.ExecuteTemplate(&b, tmpl, data); err != nil {
			return fmt.Errorf("sqlq: %s: %w", path, err)
		}
		src, err := format.Source(b.Bytes())
		if err != nil {
			return fmt.Errorf("sqlq: %s: %w\n%s", path, err, b.Bytes())
		}
		files = append(files, File{Path: path, Data: src})
		return nil
	}
	if err := add(sqlqDir+"/sqlq.go", "neutral", data); err != nil {
		return nil, err
	}
	for _, sd := range dialects {
		if err := add(sqlqDir+"/"+sd.Name+".go", "adapter", map[string]any{"D": sd, "Stmts": stmts}); err != nil {
			return nil, err
		}
		if len(sd.Batch) > 0 {
			if err := add("generated/sqlc/"+sd.Name+"/"+sqlcQueueFile, "queue", sd); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// WriteSQLQ writes the adapters step's files under root and removes every other file of
// generated/sqlq (and a queue file the spec no longer asks for).
func WriteSQLQ(root string, files []File) error {
	want, err := writeChanged(root, files)
	if err != nil {
		return err
	}
	var stale []string
	err = filepath.WalkDir(filepath.Join(root, filepath.FromSlash(sqlqDir)), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !e.IsDir() {
			stale = append(stale, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, d := range sqlDialects {
		stale = append(stale, filepath.Join(root, "generated", "sqlc", d, sqlcQueueFile))
	}
	for _, p := range stale {
		rel, _ := filepath.Rel(root, p)
		if want[filepath.ToSlash(rel)] {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

var sqlqTemplates = template.Must(template.New("sqlq").Funcs(template.FuncMap{
	"has": func(q *sqlqStatement, d string) bool { return slices.Contains(q.Dialects, d) },
	"lower": func(s string) string {
		return strings.ToLower(s[:1]) + s[1:]
	},
	// call renders the arguments of dialect d's sqlc method from the neutral params p.
	"call": func(q *sqlqStatement, d, pkg, p string) string {
		m := q.Methods[d]
		if m.ParamStruct != "" {
			var kv []string
			for _, f := range m.Fields {
				kv = append(kv, f.Name+": "+p+"."+f.Name)
			}
			return ", " + pkg + "." + m.ParamStruct + "{" + strings.Join(kv, ", ") + "}"
		}
		var out string
		for _, f := range m.Fields {
			out += ", " + p + "." + f.Name
		}
		return out
	},
	"pkgParams": func(m *sqlcMethod) string {
		var out string
		for _, f := range m.Params {
			out += ", " + f.Name + " " + f.Type
		}
		return out
	},
	"join": strings.Join,
	// elem is the row type of dialect d's sqlc method as the adapter names it.
	"elem": func(q *sqlqStatement, d string) string {
		if q.Row != nil {
			return d + "." + q.Methods[d].Elem
		}
		return q.Methods[d].Elem
	},
	// rowFn is the pgx row function that scans one row of q on dialect d: sqlc's row struct
	// field by field, in sqlc's order (no reflection), or the scalar.
	"rowFn": func(q *sqlqStatement, d string) string {
		m := q.Methods[d]
		if q.Row == nil {
			return "pgx.RowTo[" + m.Elem + "]"
		}
		var dst []string
		for _, f := range q.Row {
			dst = append(dst, "&i."+f.Name)
		}
		return "func(row pgx.CollectableRow) (" + m.Elem + ", error) {\nvar i " + m.Elem + "\nerr := row.Scan(" + strings.Join(dst, ", ") + ")\nreturn i, err\n}"
	},
	"anyOne": func(qs []*sqlqStatement) bool {
		return slices.ContainsFunc(qs, func(q *sqlqStatement) bool { return q.Returns == "one" })
	},
	"hasParams": func(q *sqlqStatement) bool { return len(q.Fields) > 0 },
}).Parse(sqlqTemplateText))

const sqlqTemplateText = `
{{define "header"}}// Code generated by simbagen from spec/ and sqlc's output; DO NOT EDIT.
{{end}}

{{define "neutral"}}{{template "header"}}
// Package sqlq is the one queries interface of every SQL dialect: a method per statement of
// spec/sql.yaml, with dialect-free parameter and row types, adapters over each dialect's sqlc
// package (generated/sqlc/<dialect>), the state an operation's statements read and fill (State),
// an executor that runs one statement on that state (Exec) and a recording wrapper (Recorder).
// The backend's interpreter runs the operation table of generated/wire over it.
package sqlq

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrNoRows is what a one statement's method returns when the statement returned no row.
var ErrNoRows = errors.New("sqlq: no rows in result set")

// errNotIn is the error of a statement the dialect does not have.
func errNotIn(dialect, stmt string) error {
	return fmt.Errorf("sqlq: statement %s does not exist on %s", stmt, dialect)
}

// Statement names one statement of the spec.
type Statement int

// The statements, in spec order.
const (
{{- range $i, $q := .Stmts}}
	// Stmt{{$q.Name}}: {{$q.Doc}}
	Stmt{{$q.Name}}{{if eq $i 0}} Statement = iota{{end}}
{{- end}}
	// NumStatements is the number of statements.
	NumStatements int = iota
)

var statementNames = [...]string{ {{- range .Stmts}}"{{.Name}}", {{end}} }

// String is the statement's sqlc query name.
func (s Statement) String() string {
	if s < 0 || int(s) >= len(statementNames) {
		return fmt.Sprintf("Statement(%d)", int(s))
	}
	return statementNames[s]
}

// StatementByName returns the statement of a sqlc query name.
func StatementByName(name string) (Statement, bool) {
	for i, n := range statementNames {
		if n == name {
			return Statement(i), true
		}
	}
	return 0, false
}
{{range .Stmts}}{{if hasParams .}}
// {{.Name}}Params are the parameters of {{.Name}}.
type {{.Name}}Params struct {
{{- range .Fields}}
	{{.Name}} {{.Type}}
{{- end}}
}
{{end}}{{if .Row}}
// {{.Name}}Row is one row of {{.Name}}.
type {{.Name}}Row struct {
{{- range .Row}}
	{{.Name}} {{.Type}}
{{- end}}
}
{{end}}{{end}}
// Queries runs every statement of every dialect; a statement a dialect does not have fails.
type Queries interface {
{{- range .Stmts}}
	// {{.Name}}: {{.Doc}}
	{{.Name}}(ctx context.Context{{if hasParams .}}, p {{.Name}}Params{{end}}) ({{with .Result}}{{.}}, {{end}}error)
{{- end}}
	// Batch sends the statements at once, pipelined in one round trip, reading their values
	// into st as Exec does (the dialects whose operations the spec declares batch or pipeline).
	Batch(ctx context.Context, stmts []Statement, st *State) error
}

// Args are the parameters of every statement, by name: an operation sets those its
// statements read.
type Args struct {
{{- range .Args}}
	{{.Name}} {{.Type}}
{{- end}}
}

// Given reports whether the parameter param (a spec parameter name, as a step's if names it)
// is given, i.e. not empty.
func (a *Args) Given(param string) bool {
	switch param {
{{- range .Ifs}}
	case "{{index . 0}}":
		return len(a.{{index . 1}}) > 0
{{- end}}
	}
	return false
}

// Results holds the value each statement returned, by statement.
type Results struct {
{{- range .Stmts}}{{if .Result}}
	{{.Name}} {{.Result}}{{end}}{{end}}
}

// State is what an operation's statements read (Args) and return (Out, NoRow).
type State struct {
	Args Args
	Out  Results
	// NoRow: the one statement returned no row.
	NoRow [NumStatements]bool
}

// Exec runs statement s on q with the parameters of st.Args and stores its value in st.Out
// (or marks st.NoRow when a one statement returned no row).
func Exec(ctx context.Context, q Queries, s Statement, st *State) error {
	switch s {
{{- range .Stmts}}
	case Stmt{{.Name}}:
{{- if eq .Returns "exec"}}
		return q.{{.Name}}(ctx{{if hasParams .}}, {{.Name}}Params{ {{- range .Fields}}{{.Name}}: st.Args.{{.Name}}, {{end}} }{{end}})
{{- else}}
		v, err := q.{{.Name}}(ctx{{if hasParams .}}, {{.Name}}Params{ {{- range .Fields}}{{.Name}}: st.Args.{{.Name}}, {{end}} }{{end}})
{{- if eq .Returns "one"}}
		if errors.Is(err, ErrNoRows) {
			st.NoRow[s] = true
			return nil
		}
{{- end}}
		st.Out.{{.Name}} = v
		return err
{{- end}}
{{- end}}
	}
	return fmt.Errorf("sqlq: unknown statement %d", int(s))
}

// Recorder is a Queries that records the name of every statement it runs (batched ones
// included) before running it on Q.
type Recorder struct {
	Q     Queries
	mu    sync.Mutex
	names []string
}

func (r *Recorder) record(s Statement) {
	r.mu.Lock()
	r.names = append(r.names, s.String())
	r.mu.Unlock()
}

// Take returns the names recorded since the last Take, in order, and forgets them.
func (r *Recorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.names
	r.names = nil
	return out
}
{{range .Stmts}}
// {{.Name}} records the statement and runs it on r.Q.
func (r *Recorder) {{.Name}}(ctx context.Context{{if hasParams .}}, p {{.Name}}Params{{end}}) ({{with .Result}}{{.}}, {{end}}error) {
	r.record(Stmt{{.Name}})
	return r.Q.{{.Name}}(ctx{{if hasParams .}}, p{{end}})
}
{{end}}
// Batch records every statement and sends them on r.Q.
func (r *Recorder) Batch(ctx context.Context, stmts []Statement, st *State) error {
	for _, s := range stmts {
		r.record(s)
	}
	return r.Q.Batch(ctx, stmts, st)
}
{{end}}


{{define "adapter"}}{{template "header"}}
package sqlq

import (
	"context"
	{{if .D.Pgx}}"errors"

	"github.com/jackc/pgx/v5"
	{{else}}"database/sql"
	"errors"
	{{end}}
	"github.com/simba-go/simba/generated/sqlc/{{.D.Name}}"
)
{{$d := .D}}
{{if $d.Pgx}}
// {{$d.Go}}DB is what the {{$d.Name}} adapter runs on: a pool, a pooled connection or a
// transaction.
type {{$d.Go}}DB interface {
	{{$d.Name}}.DBTX
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// {{$d.Go}} adapts the sqlc package of {{$d.Name}} to Queries.
func {{$d.Go}}(db {{$d.Go}}DB) Queries { return {{lower $d.Go}}Queries{q: {{$d.Name}}.New(db), db: db} }

type {{lower $d.Go}}Queries struct {
	q  *{{$d.Name}}.Queries
	db {{$d.Go}}DB
}

func {{lower $d.Go}}NoRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNoRows
	}
	return err
}
{{else}}
// {{$d.Go}} adapts the sqlc package of {{$d.Name}} to Queries.
func {{$d.Go}}(db {{$d.Name}}.DBTX) Queries { return {{lower $d.Go}}Queries{q: {{$d.Name}}.New(db)} }

type {{lower $d.Go}}Queries struct {
	q *{{$d.Name}}.Queries
}

func {{lower $d.Go}}NoRows(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNoRows
	}
	return err
}
{{end}}
{{range .Stmts}}{{$q := .}}
{{- if has . $d.Name}}
func (a {{lower $d.Go}}Queries) {{.Name}}(ctx context.Context{{if hasParams .}}, p {{.Name}}Params{{end}}) ({{with .Result}}{{.}}, {{end}}error) {
{{- if eq .Returns "exec"}}
	return a.q.{{.Name}}(ctx{{call . $d.Name $d.Name "p"}})
{{- else if eq .Returns "one"}}
	v, err := a.q.{{.Name}}(ctx{{call . $d.Name $d.Name "p"}})
	return {{if .Row}}{{.Name}}Row(v){{else}}v{{end}}, {{lower $d.Go}}NoRows(err)
{{- else if .Row}}
	rows, err := a.q.{{.Name}}(ctx{{call . $d.Name $d.Name "p"}})
	if err != nil {
		return nil, err
	}
	out := make([]{{.Name}}Row, len(rows))
	for i, r := range rows {
		out[i] = {{.Name}}Row(r)
	}
	return out, nil
{{- else}}
	return a.q.{{.Name}}(ctx{{call . $d.Name $d.Name "p"}})
{{- end}}
}
{{else}}
func ({{lower $d.Go}}Queries) {{.Name}}(context.Context{{if hasParams .}}, {{.Name}}Params{{end}}) ({{with .Result}}{{.}}, {{end}}error) {
	{{if .Result}}var zero {{.Result}}
	return zero, {{else}}return {{end}}errNotIn("{{$d.Name}}", "{{.Name}}")
}
{{end}}{{end}}
{{if $d.Pgx}}
// Batch queues the statements on one pgx.Batch (sqlc's statements, by the queue functions of
// generated/sqlc/{{$d.Name}}) and sends it: one round trip, run by the server in order.
func (a {{lower $d.Go}}Queries) Batch(ctx context.Context, stmts []Statement, st *State) error {
	var b pgx.Batch
	for _, s := range stmts {
		switch s {
{{- range $d.Batch}}
		case Stmt{{.Name}}:
{{- if eq .Returns "exec"}}
			{{$d.Name}}.Queue{{.Name}}(&b{{call . $d.Name $d.Name "st.Args"}})
{{- else if eq .Returns "one"}}
			{{$d.Name}}.Queue{{.Name}}(&b{{call . $d.Name $d.Name "st.Args"}}, func(v {{elem . $d.Name}}, found bool) {
				st.Out.{{.Name}}, st.NoRow[s] = {{if .Row}}{{.Name}}Row(v){{else}}v{{end}}, !found
			})
{{- else}}
			st.Out.{{.Name}} = nil // the batch may be sent again (a retried deadlock)
			{{$d.Name}}.Queue{{.Name}}(&b{{call . $d.Name $d.Name "st.Args"}}, func(r {{elem . $d.Name}}) {
				st.Out.{{.Name}} = append(st.Out.{{.Name}}, {{if .Row}}{{.Name}}Row(r){{else}}r{{end}})
			})
{{- end}}
{{- end}}
		default:
			return errors.New("sqlq: statement " + s.String() + " is not batched on {{$d.Name}}")
		}
	}
	return a.db.SendBatch(ctx, &b).Close()
}
{{else}}
// Batch fails: {{$d.Name}} pipelines nothing.
func ({{lower $d.Go}}Queries) Batch(context.Context, []Statement, *State) error {
	return errors.New("sqlq: {{$d.Name}} sends no batch")
}
{{end}}{{end}}

{{define "queue"}}{{template "header"}}
package {{.Name}}

import (
	{{if anyOne .Batch}}"errors"

	{{end}}"github.com/jackc/pgx/v5"
)
{{range .Batch}}{{$m := index .Methods $.Name}}
// Queue{{.Name}} queues {{.Name}} on b{{if eq .Returns "one"}}; done receives its row (found false when there is
// none) while the batch's results are read{{else if eq .Returns "many"}}; each receives its rows, in order, while the
// batch's results are read (no slice is collected: the caller keeps what it needs){{end}}.
func Queue{{.Name}}(b *pgx.Batch{{pkgParams $m}}{{if eq .Returns "one"}}, done func({{$m.Elem}}, bool){{else if eq .Returns "many"}}, each func({{$m.Elem}}){{end}}) {
{{- if eq .Returns "exec"}}
	b.Queue({{$m.Const}}{{range $m.Args}}, {{.}}{{end}})
{{- else if eq .Returns "one"}}
	b.Queue({{$m.Const}}{{range $m.Args}}, {{.}}{{end}}).Query(func(rows pgx.Rows) error {
		v, err := pgx.CollectOneRow(rows, {{rowFn . $.Name}})
		if errors.Is(err, pgx.ErrNoRows) {
			done(v, false)
			return nil
		}
		if err != nil {
			return err
		}
		done(v, true)
		return nil
	})
{{- else}}
	scan := {{rowFn . $.Name}}
	b.Queue({{$m.Const}}{{range $m.Args}}, {{.}}{{end}}).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return err
			}
			each(v)
		}
		return rows.Err()
	})
{{- end}}
}
{{end}}{{end}}
`
