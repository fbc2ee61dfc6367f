package gen

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// SQLSchemaCheckSpec is spec/sql.yaml's schema_check: what a backend checks of the live schema
// at open, and the catalog queries it reads it with.
type SQLSchemaCheckSpec struct {
	// CompatibleTypes maps each base type of the spec's types (VARCHAR, TEXT, BIGINT, INTEGER)
	// to the catalog type names, per dialect, that hold its values.
	CompatibleTypes map[string]map[string][]string `yaml:"compatible_types"`
	// Queries are the catalog queries of each dialect.
	Queries map[string]SQLCatalogQueries `yaml:"queries"`
}

// SQLCatalogQueries are one dialect's catalog queries (see spec/sql.yaml for their columns).
type SQLCatalogQueries struct {
	Columns          string `yaml:"columns"`
	PrimaryKeys      string `yaml:"primary_keys"`
	ForeignKeys      string `yaml:"foreign_keys"`
	TableDefinitions string `yaml:"table_definitions"`
	// Access (optional) returns table_name and missing: the tables the connection cannot
	// reach for want of a privilege the catalog can tell, and which privilege on which object.
	Access string `yaml:"access"`
	// TableProbe (optional) reads nothing from {{table}}: run on a table the catalog did not
	// show, its refusal tells a missing privilege from a missing table.
	TableProbe string `yaml:"table_probe"`
}

// sqlTypePartsRE splits a column type the spec accepts (sqlTypeRE) into base type, length and
// collation.
var sqlTypePartsRE = regexp.MustCompile(`^([A-Z]+)(?:\(([0-9]+)\))?(?: (?:CHARACTER SET [a-z0-9]+ )?COLLATE ("C"|BINARY|[a-z0-9_]+))?$`)

// sqlCatalogTypeRE is a catalog type name as the columns queries report them.
var sqlCatalogTypeRE = regexp.MustCompile(`^[a-z][a-z0-9 ]*$`)

// sqlTypeParts returns the base type, the declared length (0: none) and the collation (without
// quotes; "" when the type names none) of a spec column type.
func sqlTypeParts(ty string) (base string, length int64, collation string, ok bool) {
	m := sqlTypePartsRE.FindStringSubmatch(ty)
	if m == nil {
		return "", 0, "", false
	}
	if m[2] != "" {
		n, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			return "", 0, "", false
		}
		length = n
	}
	return m[1], length, strings.Trim(m[3], `"`), true
}

// schemaTablesList is the {{schema_tables}} placeholder's value: the tables as SQL literals.
func (s *SQLSpec) schemaTablesList() string {
	var lits []string
	for _, t := range s.Tables {
		lits = append(lits, "'"+t.Name+"'")
	}
	return strings.Join(lits, ", ")
}

// catalogQuery expands a catalog query of dialect d: {{schema_tables}} and the variants.
func (s *SQLSpec) catalogQuery(field, text, d string) (string, error) {
	text = strings.ReplaceAll(text, "{{schema_tables}}", s.schemaTablesList())
	out, err := s.expand(field, text, d)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(strings.TrimSpace(out), ";"), nil
}

func (s *SQLSpec) validateSchemaCheck() error {
	f := sqlFile
	sc := s.SchemaCheck
	for _, base := range sqlSortedKeys(sc.CompatibleTypes) {
		field := "schema_check.compatible_types." + base
		for _, d := range sqlSortedKeys(sc.CompatibleTypes[base]) {
			if !slices.Contains(sqlDialects, d) {
				return specErr(f, field+"."+d, "unknown dialect")
			}
		}
		for _, d := range sqlDialects {
			names := sc.CompatibleTypes[base][d]
			if len(names) == 0 {
				return specErr(f, field, "missing catalog types for %s", d)
			}
			for i, n := range names {
				if !sqlCatalogTypeRE.MatchString(n) {
					return specErr(f, fmt.Sprintf("%s.%s[%d]", field, d, i), "%q is not a lower-case catalog type name", n)
				}
			}
		}
	}
	// Every type a column uses has a known base with catalog types on every dialect.
	for _, t := range s.Tables {
		for _, c := range t.Columns {
			for _, d := range sqlDialects {
				base, _, _, ok := sqlTypeParts(s.Types[c.Type][d])
				if !ok {
					return specErr(f, "types."+c.Type+"."+d, "cannot split %q into base type, length and collation", s.Types[c.Type][d])
				}
				if _, ok := sc.CompatibleTypes[base]; !ok {
					return specErr(f, "schema_check.compatible_types", "no entry for %s (the base of types.%s.%s)", base, c.Type, d)
				}
			}
		}
	}
	for _, d := range sqlSortedKeys(sc.Queries) {
		if !slices.Contains(sqlDialects, d) {
			return specErr(f, "schema_check.queries."+d, "unknown dialect")
		}
	}
	for _, d := range sqlDialects {
		q, ok := sc.Queries[d]
		field := "schema_check.queries." + d
		if !ok {
			return specErr(f, "schema_check.queries", "missing dialect %s", d)
		}
		for name, text := range map[string]string{
			"columns": q.Columns, "primary_keys": q.PrimaryKeys, "foreign_keys": q.ForeignKeys,
			"table_definitions": q.TableDefinitions, "access": q.Access,
		} {
			if strings.TrimSpace(text) == "" {
				if name == "table_definitions" || name == "access" {
					continue
				}
				return specErr(f, field+"."+name, "is empty")
			}
			out, err := s.catalogQuery(field+"."+name, text, d)
			if err != nil {
				return err
			}
			if strings.Contains(out, ";") {
				return specErr(f, field+"."+name, "holds more than one statement")
			}
			if !strings.Contains(text, "{{schema_tables}}") {
				return specErr(f, field+"."+name, "must restrict itself to {{schema_tables}}")
			}
		}
		if strings.TrimSpace(q.TableProbe) != "" {
			if _, err := s.tableProbe(field+".table_probe", q.TableProbe, d, "t"); err != nil {
				return err
			}
		}
	}
	return nil
}

// tableProbe expands dialect d's table_probe for table: {{table}} (once) and the variants.
func (s *SQLSpec) tableProbe(field, text, d, table string) (string, error) {
	parts, err := s.expandOwn(field, strings.TrimSpace(text), d, "table")
	if err != nil {
		return "", err
	}
	return parts[0] + table + parts[1], nil
}

// genSchemaCheck writes generated/wire/sqlschema.go: the schema each dialect's backend checks at
// open, derived from the spec's tables and types, and the catalog queries that read it.
func (s *SQLSpec) genSchemaCheck() (File, error) {
	f := jen.NewFilePathName(wirePkg, "wire")

	lineComments(f, "SQLSchemaCheck is what a backend checks of a live database's schema at open, on one\n"+
		"dialect, and the catalog queries it reads the schema with (spec/sql.yaml schema_check).")
	f.Type().Id("SQLSchemaCheck").Struct(
		jen.Comment("Tables are the tables the library needs, in the migration's order."),
		jen.Id("Tables").Index().Id("SQLTableCheck"),
		jen.Comment("ColumnsQuery returns table_name, column_name, data_type, max_length (-1: none),"),
		jen.Comment("collation and nullable (1 or 0), all as text."),
		jen.Id("ColumnsQuery").String(),
		jen.Comment("PrimaryKeysQuery returns table_name, column_name, in key order."),
		jen.Id("PrimaryKeysQuery").String(),
		jen.Comment("ForeignKeysQuery returns table_name, column_name, ref_table, ref_column, on_delete"),
		jen.Comment("and constraint_name of every single-column foreign key."),
		jen.Id("ForeignKeysQuery").String(),
		jen.Comment("TableDefinitionsQuery (may be empty) returns table_name and the CREATE TABLE text,"),
		jen.Comment("whose column COLLATE clauses override the collation ColumnsQuery reports."),
		jen.Id("TableDefinitionsQuery").String(),
		jen.Comment("AccessQuery (may be empty) returns table_name and missing (which privilege on which"),
		jen.Comment("object): the tables the connection cannot reach for want of a privilege the catalog"),
		jen.Comment("can tell (PostgreSQL: USAGE on a schema the search_path names). Run after a table"),
		jen.Comment("was reported missing."),
		jen.Id("AccessQuery").String(),
	)
	f.Comment("SQLTableCheck is one table as the library needs it.")
	f.Type().Id("SQLTableCheck").Struct(
		jen.Comment("Name is the table's name."),
		jen.Id("Name").String(),
		jen.Comment("Columns are the columns the library uses (the table may have more)."),
		jen.Id("Columns").Index().Id("SQLColumnCheck"),
		jen.Comment("PrimaryKey is the primary key's columns, in order."),
		jen.Id("PrimaryKey").Index().String(),
		jen.Comment("ForeignKeys are the foreign keys the library relies on."),
		jen.Id("ForeignKeys").Index().Id("SQLForeignKeyCheck"),
		jen.Comment("Migration is the file of the migration that creates the table, e.g."),
		jen.Comment("\"0003_waiters.sql\" (under sql/schema/<dialect>/)."),
		jen.Id("Migration").String(),
		jen.Comment("ProbeQuery (may be empty) reads nothing from the table: run when the catalog did"),
		jen.Comment("not show the table, its refusal tells a missing privilege (MySQL/MariaDB 1142)"),
		jen.Comment("from a missing table (1146)."),
		jen.Id("ProbeQuery").String(),
	)
	f.Comment("SQLColumnCheck is one column as the library needs it.")
	f.Type().Id("SQLColumnCheck").Struct(
		jen.Comment("Name is the column's name."),
		jen.Id("Name").String(),
		jen.Comment("Declared is the column's type as the migration declares it."),
		jen.Id("Declared").String(),
		jen.Comment("Types are the catalog type names that hold the column's values."),
		jen.Id("Types").Index().String(),
		jen.Comment("MinLength is the least maximum length a text column may have (0: any)."),
		jen.Id("MinLength").Int64(),
		jen.Comment("Collation is the collation the column must have, compared case-insensitively"),
		jen.Comment("(empty: any)."),
		jen.Id("Collation").String(),
		jen.Comment("Nullable: the column may hold NULL; otherwise it must be NOT NULL."),
		jen.Id("Nullable").Bool(),
	)
	f.Comment("SQLForeignKeyCheck is one foreign key the library relies on.")
	f.Type().Id("SQLForeignKeyCheck").Struct(
		jen.Comment("Constraint is the name the migration gives it."),
		jen.Id("Constraint").String(),
		jen.Comment("Column references RefTable.RefColumn."),
		jen.Id("Column").String(),
		jen.Comment("RefTable is the referenced table."),
		jen.Id("RefTable").String(),
		jen.Comment("RefColumn is the referenced column."),
		jen.Id("RefColumn").String(),
		jen.Comment("OnDelete is the action on a deleted referenced row: \"SET NULL\" or \"CASCADE\"."),
		jen.Id("OnDelete").String(),
	)

	actions := map[string]string{"set_null": "SET NULL", "cascade": "CASCADE"}
	migrationOf := map[string]string{} // table → the file of the migration that creates it
	for _, m := range s.leaseMigrations() {
		for _, t := range m.Tables {
			migrationOf[t.Name] = m.migrationFile()
		}
	}
	var cases []jen.Code
	for _, d := range sqlDialects {
		var tables []jen.Code
		for _, t := range s.Tables {
			var cols, fks []jen.Code
			for _, c := range t.Columns {
				ty := s.Types[c.Type][d]
				base, length, coll, _ := sqlTypeParts(ty) // validated
				var types []jen.Code
				for _, n := range s.SchemaCheck.CompatibleTypes[base][d] {
					types = append(types, jen.Lit(n))
				}
				cols = append(cols, jen.Values(jen.Dict{
					jen.Id("Name"):      jen.Lit(c.Name),
					jen.Id("Declared"):  jen.Lit(ty),
					jen.Id("Types"):     jen.Index().String().Values(types...),
					jen.Id("MinLength"): jen.Lit(int(length)),
					jen.Id("Collation"): jen.Lit(coll),
					jen.Id("Nullable"):  jen.Lit(c.Nullable),
				}))
				if r := c.References; r != nil {
					fks = append(fks, jen.Values(jen.Dict{
						jen.Id("Constraint"): jen.Lit(r.Constraint),
						jen.Id("Column"):     jen.Lit(c.Name),
						jen.Id("RefTable"):   jen.Lit(r.Table),
						jen.Id("RefColumn"):  jen.Lit(r.Column),
						jen.Id("OnDelete"):   jen.Lit(actions[r.OnDelete]),
					}))
				}
			}
			var pk []jen.Code
			for _, k := range t.PrimaryKey {
				pk = append(pk, jen.Lit(k))
			}
			probe := ""
			if text := s.SchemaCheck.Queries[d].TableProbe; strings.TrimSpace(text) != "" {
				var err error
				if probe, err = s.tableProbe("schema_check.queries."+d+".table_probe", text, d, t.Name); err != nil {
					return File{}, err
				}
			}
			tables = append(tables, jen.Values(jen.Dict{
				jen.Id("ProbeQuery"):  jen.Lit(probe),
				jen.Id("Name"):        jen.Lit(t.Name),
				jen.Id("Columns"):     jen.Index().Id("SQLColumnCheck").Values(cols...),
				jen.Id("PrimaryKey"):  jen.Index().String().Values(pk...),
				jen.Id("ForeignKeys"): jen.Index().Id("SQLForeignKeyCheck").Values(fks...),
				jen.Id("Migration"):   jen.Lit(migrationOf[t.Name]),
			}))
		}
		q := s.SchemaCheck.Queries[d]
		field := "schema_check.queries." + d
		var qs [5]string
		for i, text := range []string{q.Columns, q.PrimaryKeys, q.ForeignKeys, q.TableDefinitions, q.Access} {
			if strings.TrimSpace(text) == "" {
				continue
			}
			out, err := s.catalogQuery(field, text, d)
			if err != nil {
				return File{}, err
			}
			qs[i] = out
		}
		cases = append(cases, jen.Case(jen.Id("SQL"+sqlDialectGo(d))).Block(
			jen.Return(jen.Id("SQLSchemaCheck").Values(jen.Dict{
				jen.Id("Tables"):                jen.Index().Id("SQLTableCheck").Values(tables...),
				jen.Id("ColumnsQuery"):          jen.Lit(qs[0]),
				jen.Id("PrimaryKeysQuery"):      jen.Lit(qs[1]),
				jen.Id("ForeignKeysQuery"):      jen.Lit(qs[2]),
				jen.Id("TableDefinitionsQuery"): jen.Lit(qs[3]),
				jen.Id("AccessQuery"):           jen.Lit(qs[4]),
			}), jen.True()),
		))
	}
	cases = append(cases, jen.Default().Block(jen.Return(jen.Id("SQLSchemaCheck").Values(), jen.False())))
	lineComments(f, "SQLSchemaCheckByName is the schema check of dialect name, or false if there is no such\n"+
		"dialect. Each call returns fresh slices.")
	f.Func().Id("SQLSchemaCheckByName").Params(jen.Id("name").String()).Params(jen.Id("SQLSchemaCheck"), jen.Bool()).Block(
		jen.Switch(jen.Id("name")).Block(cases...),
	)
	return renderGo("generated/wire/sqlschema.go", f)
}
