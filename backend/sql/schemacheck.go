package sql

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// The columns each catalog query returns (spec/sql.yaml schema_check.queries).
const (
	catalogColumnsCols     = 6 // table_name, column_name, data_type, max_length, collation, nullable
	catalogPrimaryKeyCols  = 2 // table_name, column_name
	catalogForeignKeyCols  = 6 // table_name, column_name, ref_table, ref_column, on_delete, constraint_name
	catalogDefinitionsCols = 2 // table_name, sql
)

// catalogSnapshot is what the catalog queries returned, one row per slice.
type catalogSnapshot struct {
	columns, primaryKeys, foreignKeys, definitions [][]string
}

// readCatalog runs the dialect's catalog queries (three or four, once per backend).
func (b *Backend) readCatalog(ctx context.Context, want wire.SQLSchemaCheck) (catalogSnapshot, error) {
	var s catalogSnapshot
	var err error
	if s.columns, err = b.d.catalog(ctx, want.ColumnsQuery, catalogColumnsCols); err != nil {
		return s, err
	}
	if s.primaryKeys, err = b.d.catalog(ctx, want.PrimaryKeysQuery, catalogPrimaryKeyCols); err != nil {
		return s, err
	}
	if s.foreignKeys, err = b.d.catalog(ctx, want.ForeignKeysQuery, catalogForeignKeyCols); err != nil {
		return s, err
	}
	if want.TableDefinitionsQuery != "" {
		if s.definitions, err = b.d.catalog(ctx, want.TableDefinitionsQuery, catalogDefinitionsCols); err != nil {
			return s, err
		}
	}
	return s, nil
}

// checkDrift compares the live schema with the one the spec declares (wire.SQLSchemaCheckByName)
// and returns an error matching spi.ErrSchemaDrift (and spi.ErrSchemaMissing) that lists every
// difference. It runs after the schema version check, once per backend.
func (b *Backend) checkDrift(ctx context.Context) error {
	want, ok := wire.SQLSchemaCheckByName(b.name)
	if !ok {
		return spi.AsPermanent(fmt.Errorf("sql %s: no schema check for the dialect", b.name))
	}
	snap, err := b.readCatalog(ctx, want)
	if err != nil {
		return b.fail("schema check", err)
	}
	problems, migrations := schemaDiff(want, snap)
	if len(problems) == 0 {
		return nil
	}
	// A table the catalog does not show may be one the user may not see (hiddenTables): the
	// fix is then a GRANT, not a migration.
	var missing []string
	for _, t := range want.Tables {
		if !slices.ContainsFunc(snap.columns, func(r []string) bool { return strings.EqualFold(r[0], t.Name) }) {
			missing = append(missing, t.Name)
		}
	}
	if len(missing) > 0 {
		cause := fmt.Errorf("the catalog shows no table %s", strings.Join(missing, ", "))
		if denied := b.hiddenTables(ctx, "schema check", want, missing, cause); denied != nil {
			return denied
		}
	}
	// Each difference names the migration that creates its table: a missing simba_waiter table
	// was reported against 0001_init.sql, which does not create it.
	files := make([]string, len(migrations))
	for i, m := range migrations {
		files[i] = "sql/schema/" + b.name + "/" + m
	}
	them := "it"
	if len(files) > 1 {
		them = "them"
	}
	return fmt.Errorf("%w: sql %s: %s: the schema differs from %s (embedded in "+
		"github.com/simba-go/simba/sql/schema): alter the tables to match %s, or drop them and "+
		"apply %s again (Migrate applies only the migrations the version table lacks, and never alters a table)",
		spi.ErrSchemaDrift, b.name, strings.Join(problems, "; "), strings.Join(files, " and "), them, them)
}

// schemaProblems lists, in the spec's table order, every way the catalog differs from want.
func schemaProblems(want wire.SQLSchemaCheck, s catalogSnapshot) []string {
	out, _ := schemaDiff(want, s)
	return out
}

// schemaDiff is schemaProblems, and the migrations that create the tables the problems concern
// (wire.SQLTableCheck.Migration), in the spec's order, each once.
func schemaDiff(want wire.SQLSchemaCheck, s catalogSnapshot) (out, migrations []string) {
	cols := map[string]map[string]column{} // table → column (lower case) → column
	for _, r := range s.columns {
		n, err := strconv.ParseInt(strings.TrimSpace(r[3]), 10, 64)
		if err != nil {
			n = -1
		}
		t := strings.ToLower(r[0])
		if cols[t] == nil {
			cols[t] = map[string]column{}
		}
		cols[t][strings.ToLower(r[1])] = column{
			dataType:  strings.ToLower(strings.TrimSpace(r[2])),
			maxLength: n,
			collation: r[4],
			nullable:  strings.TrimSpace(r[5]) == "1",
		}
	}
	for _, r := range s.definitions {
		t := strings.ToLower(r[0])
		for c, coll := range columnCollations(r[1]) {
			if x, ok := cols[t][c]; ok {
				x.collation = coll
				cols[t][c] = x
			}
		}
	}
	pks := map[string][]string{}
	for _, r := range s.primaryKeys {
		t := strings.ToLower(r[0])
		pks[t] = append(pks[t], strings.ToLower(r[1]))
	}
	fks := map[string][]fk{} // "table.column" → foreign keys
	for _, r := range s.foreignKeys {
		k := strings.ToLower(r[0]) + "." + strings.ToLower(r[1])
		fks[k] = append(fks[k], fk{strings.ToLower(r[2]), strings.ToLower(r[3]), strings.ToUpper(strings.TrimSpace(r[4])), r[5]})
	}

	for _, t := range want.Tables {
		before := len(out)
		out = append(out, tableProblems(t, cols[strings.ToLower(t.Name)], pks, fks)...)
		if len(out) > before && !slices.Contains(migrations, t.Migration) {
			migrations = append(migrations, t.Migration)
		}
	}
	return out, migrations
}

// column is a column as the catalog describes it.
type column struct {
	dataType  string
	maxLength int64
	collation string
	nullable  bool
}

// fk is a foreign key as the catalog describes it.
type fk struct{ refTable, refColumn, onDelete, name string }

// tableProblems lists every way table t differs from have (its columns by lower-case name, nil
// when the table is missing), pks (primary key columns by table) and fks (foreign keys by
// "table.column").
func tableProblems(t wire.SQLTableCheck, have map[string]column, pks map[string][]string, fks map[string][]fk) (out []string) {
	if have == nil {
		return []string{fmt.Sprintf("table %s is missing", t.Name)}
	}
	for _, c := range t.Columns {
		where := t.Name + "." + c.Name
		x, ok := have[strings.ToLower(c.Name)]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("column %s is missing (want %s)", where, c.Declared))
			continue
		case !slices.Contains(c.Types, x.dataType):
			out = append(out, fmt.Sprintf("column %s has type %s, want %s", where, x.dataType, c.Declared))
		case c.MinLength > 0 && x.maxLength >= 0 && x.maxLength < c.MinLength:
			out = append(out, fmt.Sprintf("column %s holds %d characters, want %s", where, x.maxLength, c.Declared))
		}
		if c.Collation != "" && !strings.EqualFold(x.collation, c.Collation) {
			got := x.collation
			if got == "" {
				got = "none"
			}
			out = append(out, fmt.Sprintf("column %s has collation %s, want %s (bytewise comparison: %s)", where, got, c.Collation, c.Declared))
		}
		if x.nullable && !c.Nullable {
			out = append(out, fmt.Sprintf("column %s accepts NULL, want NOT NULL", where))
		}
	}
	want := make([]string, len(t.PrimaryKey))
	for i, k := range t.PrimaryKey {
		want[i] = strings.ToLower(k)
	}
	if got := pks[strings.ToLower(t.Name)]; !slices.Equal(got, want) {
		g := "none"
		if len(got) > 0 {
			g = "(" + strings.Join(got, ", ") + ")"
		}
		out = append(out, fmt.Sprintf("table %s has primary key %s, want (%s)", t.Name, g, strings.Join(t.PrimaryKey, ", ")))
	}
	for _, f := range t.ForeignKeys {
		desc := fmt.Sprintf("foreign key %s (%s.%s references %s.%s ON DELETE %s)", f.Constraint, t.Name, f.Column, f.RefTable, f.RefColumn, f.OnDelete)
		var actions []string
		found := false
		for _, x := range fks[strings.ToLower(t.Name)+"."+strings.ToLower(f.Column)] {
			if x.refTable != strings.ToLower(f.RefTable) || x.refColumn != strings.ToLower(f.RefColumn) {
				continue
			}
			// An empty action is one the server would not show: MariaDB shows a user with
			// no privilege but SELECT on a table no row of information_schema.
			// REFERENTIAL_CONSTRAINTS, so a read-only user (simba status by a monitoring
			// account) saw drift in every foreign key. The key is there, to the right
			// column; what it does on delete only a user who may write can see, and such a
			// user's check sees it.
			if x.onDelete == f.OnDelete || x.onDelete == "" {
				found = true
				break
			}
			actions = append(actions, x.onDelete)
		}
		switch {
		case found:
		case len(actions) > 0:
			out = append(out, fmt.Sprintf("%s has ON DELETE %s", desc, strings.Join(actions, ", ")))
		default:
			out = append(out, desc+" is missing")
		}
	}
	return out
}

// sqlToken is one token of a CREATE TABLE statement: a word (keyword or identifier), a quoted
// identifier (quoted, unquoted here), a string literal (str) or one punctuation character.
type sqlToken struct {
	text        string
	quoted, str bool
}

// sqlTokens splits SQL text into tokens, dropping white space and comments.
func sqlTokens(s string) []sqlToken {
	var out []sqlToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '\'' || c == '"' || c == '`' || c == '[':
			closing := c
			if c == '[' {
				closing = ']'
			}
			var b strings.Builder
			j := i + 1
			for j < len(s) {
				if s[j] == closing {
					if closing != ']' && j+1 < len(s) && s[j+1] == closing { // doubled quote
						b.WriteByte(closing)
						j += 2
						continue
					}
					break
				}
				b.WriteByte(s[j])
				j++
			}
			out = append(out, sqlToken{text: b.String(), quoted: c != '\'', str: c == '\''})
			i = j + 1
		case c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= 0x80:
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == '$' || s[j] >= '0' && s[j] <= '9' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 0x80) {
				j++
			}
			out = append(out, sqlToken{text: s[i:j]})
			i = j
		default:
			out = append(out, sqlToken{text: string(c)})
			i++
		}
	}
	return out
}

// columnCollations reads the COLLATE clause of each column definition of a CREATE TABLE
// statement (SQLite keeps the statement's text in sqlite_master): lower-case column name →
// collation name as written. Columns without a COLLATE clause are absent.
func columnCollations(createTable string) map[string]string {
	toks := sqlTokens(createTable)
	start := slices.IndexFunc(toks, func(t sqlToken) bool { return t.text == "(" && !t.quoted && !t.str })
	out := map[string]string{}
	if start < 0 {
		return out
	}
	var elem []sqlToken
	depth := 0
	flush := func() {
		defer func() { elem = elem[:0] }()
		if len(elem) == 0 {
			return
		}
		if !elem[0].quoted {
			switch strings.ToUpper(elem[0].text) {
			case "CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN":
				return // a table constraint
			}
		}
		d := 0
		for i, t := range elem {
			switch {
			case t.quoted || t.str:
			case t.text == "(":
				d++
			case t.text == ")":
				d--
			case d == 0 && i > 0 && i+1 < len(elem) && strings.EqualFold(t.text, "COLLATE"):
				out[strings.ToLower(elem[0].text)] = elem[i+1].text
			}
		}
	}
	for _, t := range toks[start+1:] {
		if !t.quoted && !t.str {
			switch t.text {
			case "(":
				depth++
			case ")":
				if depth == 0 {
					flush()
					return out
				}
				depth--
			case ",":
				if depth == 0 {
					flush()
					continue
				}
			}
		}
		elem = append(elem, t)
	}
	flush()
	return out
}
