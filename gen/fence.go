package gen

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

const fenceFile = "fence.yaml"

// FenceSpec is spec/fence.yaml: the fence table of package fence/fencesql, a migration after
// spec/sql.yaml's, and the statements the helper runs on the user's connection.
type FenceSpec struct {
	SchemaVersion int              `yaml:"schema_version"`
	Migration     string           `yaml:"migration"`
	Tables        []SQLTable       `yaml:"tables"`
	Statements    []FenceStatement `yaml:"statements"`

	sql *SQLSpec // spec/sql.yaml: dialects, types and variants
}

// FenceStatement is one statement of the fence helper, written per dialect.
type FenceStatement struct {
	Name    string            `yaml:"name"`
	Doc     string            `yaml:"doc"`
	Returns map[string]string `yaml:"returns"` // per dialect: one | exec
	SQL     map[string]string `yaml:"sql"`     // per dialect, with {{variants}} and sqlc.arg(x)
}

// fenceStatementNames are the statements the helper runs, in output order.
var fenceStatementNames = []string{"advance", "highest", "table_exists"}

// fenceArgs are the arguments a fence statement may name.
var fenceArgs = []string{"resource", "token"}

var fenceArgRE = regexp.MustCompile(`sqlc\.arg\(([a-z_]+)\)`)

// LoadFence loads and validates spec/fence.yaml against the SQL spec s.
func LoadFence(specDir string, s *SQLSpec) (*FenceSpec, error) {
	var fs FenceSpec
	if err := loadYAML(specDir, fenceFile, &fs); err != nil {
		return nil, err
	}
	fs.sql = s
	if err := fs.validate(); err != nil {
		return nil, err
	}
	return &fs, nil
}

func (fs *FenceSpec) validate() error {
	f := fenceFile
	if fs.SchemaVersion <= fs.sql.SchemaVersion || fs.SchemaVersion > 9999 {
		return specErr(f, "schema_version", "must follow spec/sql.yaml's schema_version %d (and be at most 9999), got %d", fs.sql.SchemaVersion, fs.SchemaVersion)
	}
	if err := checkIdent(f, "migration", fs.Migration); err != nil {
		return err
	}
	if len(fs.Tables) == 0 {
		return specErr(f, "tables", "is empty")
	}
	taken := map[string]bool{}
	for _, t := range fs.sql.Tables {
		taken[t.Name] = true
	}
	for i, t := range fs.Tables {
		field := fmt.Sprintf("tables[%d]", i)
		if err := checkIdent(f, field+".name", t.Name); err != nil {
			return err
		}
		if taken[t.Name] {
			return specErr(f, field+".name", "duplicate table %s (spec/sql.yaml or this file declares it)", t.Name)
		}
		taken[t.Name] = true
		field = "tables." + t.Name
		if len(t.Columns) == 0 {
			return specErr(f, field+".columns", "is empty")
		}
		if len(t.Indexes) > 0 {
			return specErr(f, field+".indexes", "fence tables have no secondary indexes")
		}
		cols := map[string]bool{}
		for j, c := range t.Columns {
			cf := fmt.Sprintf("%s.columns[%d]", field, j)
			if err := checkSQLColumn(f, cf, c, fs.sql.Types, cols); err != nil {
				return err
			}
			if c.References != nil {
				return specErr(f, cf+".references", "a fence table references nothing: it may live in a database without the lease tables")
			}
			if c.Nullable {
				return specErr(f, cf+".nullable", "fence columns are NOT NULL")
			}
		}
		if len(t.PrimaryKey) == 0 {
			return specErr(f, field+".primary_key", "is empty")
		}
		for j, k := range t.PrimaryKey {
			if !cols[k] {
				return specErr(f, fmt.Sprintf("%s.primary_key[%d]", field, j), "unknown column %q", k)
			}
		}
	}
	var names []string
	for i, st := range fs.Statements {
		field := fmt.Sprintf("statements[%d]", i)
		if !slices.Contains(fenceStatementNames, st.Name) {
			return specErr(f, field+".name", "unknown statement %q (want %s)", st.Name, strings.Join(fenceStatementNames, ", "))
		}
		if slices.Contains(names, st.Name) {
			return specErr(f, field+".name", "duplicate statement %s", st.Name)
		}
		names = append(names, st.Name)
		field = "statements." + st.Name
		if strings.TrimSpace(st.Doc) == "" {
			return specErr(f, field+".doc", "missing")
		}
		for _, m := range []map[string]string{st.Returns, st.SQL} {
			for _, d := range sqlSortedKeys(m) {
				if !slices.Contains(sqlDialects, d) {
					return specErr(f, field+"."+d, "unknown dialect")
				}
			}
		}
		for _, d := range sqlDialects {
			switch st.Returns[d] {
			case "one", "exec":
			default:
				return specErr(f, field+".returns."+d, "must be one or exec, got %q", st.Returns[d])
			}
			if st.Name != "advance" && st.Returns[d] != "one" {
				return specErr(f, field+".returns."+d, "%s returns one row", st.Name)
			}
			if _, _, err := fs.render(st, d); err != nil {
				return err
			}
		}
	}
	for _, n := range fenceStatementNames {
		if !slices.Contains(names, n) {
			return specErr(f, "statements", "missing statement %s", n)
		}
	}
	return nil
}

// render expands statement st for dialect d: the variants, then each sqlc.arg(x) as the
// dialect's bind parameter. It returns the SQL and the argument names in bind order.
func (fs *FenceSpec) render(st FenceStatement, d string) (string, []string, error) {
	field := "statements." + st.Name + ".sql." + d
	text := strings.TrimSpace(st.SQL[d])
	if text == "" {
		return "", nil, specErr(fenceFile, field, "is empty")
	}
	if strings.Contains(strings.TrimRight(text, ";"), ";") {
		return "", nil, specErr(fenceFile, field, "holds more than one statement")
	}
	out, err := fs.sql.expand(field, text, d)
	if err != nil {
		var se *SpecError
		if errors.As(err, &se) {
			se.File = fenceFile
		}
		return "", nil, err
	}
	out = strings.TrimRight(out, ";")
	var args []string
	var bad error
	out = fenceArgRE.ReplaceAllStringFunc(out, func(m string) string {
		name := fenceArgRE.FindStringSubmatch(m)[1]
		if !slices.Contains(fenceArgs, name) {
			if bad == nil {
				bad = specErr(fenceFile, field, "unknown argument %q (want one of %s)", name, strings.Join(fenceArgs, ", "))
			}
			return m
		}
		if d == "postgres" {
			if i := slices.Index(args, name); i >= 0 {
				return "$" + strconv.Itoa(i+1)
			}
			args = append(args, name)
			return "$" + strconv.Itoa(len(args))
		}
		args = append(args, name)
		return "?"
	})
	if bad != nil {
		return "", nil, bad
	}
	if strings.Contains(out, "sqlc.") {
		return "", nil, specErr(fenceFile, field, "a sqlc macro other than sqlc.arg(x)")
	}
	return out, args, nil
}

// migrationFile is the file name of the fence migration.
func (fs *FenceSpec) migrationFile() string {
	return fmt.Sprintf("%04d_%s.sql", fs.SchemaVersion, fs.Migration)
}

// asSQL is the SQL spec with the fence tables in place of the lease tables, at the fence
// migration's version: its ddlStatements are the fence migration (the tables, then the version
// row).
func (fs *FenceSpec) asSQL() *SQLSpec {
	c := *fs.sql
	c.SchemaVersion = fs.SchemaVersion
	c.Migration = fs.Migration
	c.Tables = fs.Tables
	return &c
}

// genWire writes generated/wire/sqlfence.go.
func (fs *FenceSpec) genWire() (File, error) {
	f := jen.NewFilePathName(wirePkg, "wire")
	f.Comment("SQLFenceVersion is the schema version of the migration that creates the fence table")
	f.Comment("(spec/fence.yaml); the lease backends need only SQLSchemaVersion.")
	f.Const().Id("SQLFenceVersion").Op("=").Lit(fs.SchemaVersion)
	f.Comment("SQLFenceTable is the table that keeps each fenced resource's highest token.")
	f.Const().Id("SQLFenceTable").Op("=").Lit(fs.Tables[0].Name)

	f.Comment("SQLFence is how the fence helper (package fence/fencesql) runs on one SQL dialect.")
	f.Type().Id("SQLFence").Struct(
		jen.Comment("Migration is the path of the migration that creates the fence table, within"),
		jen.Comment("sql/schema (and schema.FS)."),
		jen.Id("Migration").String(),
		jen.Comment("Advance raises a resource's highest token and locks its row until the transaction ends."),
		jen.Id("Advance").Id("SQLFenceStatement"),
		jen.Comment("AdvanceReturns: Advance returns one row, the highest token afterwards; otherwise"),
		jen.Comment("Highest follows it in the same transaction."),
		jen.Id("AdvanceReturns").Bool(),
		jen.Comment("Highest reads a resource's highest token (no row: none)."),
		jen.Id("Highest").Id("SQLFenceStatement"),
		jen.Comment("TableExists returns one row: 1 if the fence table exists, else 0."),
		jen.Id("TableExists").Id("SQLFenceStatement"),
	)
	f.Comment("SQLFenceStatement is one statement with the dialect's bind parameters.")
	f.Type().Id("SQLFenceStatement").Struct(
		jen.Comment("SQL is the statement's text."),
		jen.Id("SQL").String(),
		jen.Comment("Args names the bind arguments in order: \"resource\" or \"token\"."),
		jen.Id("Args").Index().String(),
	)
	var cases []jen.Code
	for _, d := range sqlDialects {
		stmts := map[string]jen.Code{}
		var advanceReturns bool
		for _, st := range fs.Statements {
			text, args, err := fs.render(st, d)
			if err != nil {
				return File{}, err
			}
			var as []jen.Code
			for _, a := range args {
				as = append(as, jen.Lit(a))
			}
			stmts[st.Name] = jen.Id("SQLFenceStatement").Values(jen.Dict{
				jen.Id("SQL"):  jen.Lit(text),
				jen.Id("Args"): jen.Index().String().Values(as...),
			})
			if st.Name == "advance" {
				advanceReturns = st.Returns[d] == "one"
			}
		}
		cases = append(cases, jen.Case(jen.Id("SQL"+sqlDialectGo(d))).Block(
			jen.Return(jen.Id("SQLFence").Values(jen.Dict{
				jen.Id("Migration"):      jen.Lit(d + "/" + fs.migrationFile()),
				jen.Id("Advance"):        stmts["advance"],
				jen.Id("AdvanceReturns"): jen.Lit(advanceReturns),
				jen.Id("Highest"):        stmts["highest"],
				jen.Id("TableExists"):    stmts["table_exists"],
			}), jen.True()),
		))
	}
	cases = append(cases, jen.Default().Block(jen.Return(jen.Id("SQLFence").Values(), jen.False())))
	lineComments(f, "SQLFenceByName describes the fence helper's statements on dialect name, or reports false if\nthere is no such dialect. Each call returns fresh slices.")
	f.Func().Id("SQLFenceByName").Params(jen.Id("name").String()).Params(jen.Id("SQLFence"), jen.Bool()).Block(
		jen.Switch(jen.Id("name")).Block(cases...),
	)
	return renderGo("generated/wire/sqlfence.go", f)
}
