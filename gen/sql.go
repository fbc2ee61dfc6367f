package gen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
	"go.yaml.in/yaml/v3"
)

const sqlFile = "sql.yaml"

// sqlDialects are the dialects the spec must describe, in output order.
var sqlDialects = []string{"postgres", "mysql", "sqlite"}

// sqlEngines maps each dialect to the sqlc engine that parses it.
var sqlEngines = map[string]string{"postgres": "postgresql", "mysql": "mysql", "sqlite": "sqlite"}

// sqlPackages maps each dialect to the sqlc sql_package values it may use.
var sqlPackages = map[string][]string{
	"postgres": {"pgx/v5"},
	"mysql":    {"database/sql"},
	"sqlite":   {"database/sql"},
}

// SQLSpec is spec/sql.yaml: tables, dialect variants, statements and the SPI operations built
// from them.
type SQLSpec struct {
	SchemaVersion int    `yaml:"schema_version"`
	Migration     string `yaml:"migration"`
	// LaterMigrations are the lease schema's migrations after the first (schema_version,
	// migration): each creates the tables that name it (SQLTable.Migration). The lease backends
	// need the last one.
	LaterMigrations []SQLLaterMigration `yaml:"later_migrations"`
	ReleaseChannel  string              `yaml:"release_channel"`
	// LeaseChannelPrefix starts each lease's own release channel: the prefix, then the
	// lowercase hex MD5 of the lease name.
	LeaseChannelPrefix string `yaml:"lease_channel_prefix"`
	GroupChannel       string `yaml:"group_channel"`
	// GroupChannelPrefix starts each group's own channel: the prefix, then the lowercase hex
	// MD5 of the group name.
	GroupChannelPrefix string                       `yaml:"group_channel_prefix"`
	MigrateLock        SQLMigrateLockSpec           `yaml:"migrate_lock"`
	Commit             string                       `yaml:"commit"`
	Rollback           string                       `yaml:"rollback"`
	Dialects           map[string]SQLDialectSpec    `yaml:"dialects"`
	Variants           map[string]map[string]string `yaml:"variants"`
	Types              map[string]map[string]string `yaml:"types"`
	Tables             []SQLTable                   `yaml:"tables"`
	VersionTable       string                       `yaml:"version_table"`
	VersionInsert      string                       `yaml:"version_insert"`
	Statements         []SQLStatement               `yaml:"statements"`
	Decisions          []SQLDecisionSpec            `yaml:"decisions"`
	Operations         []SQLOperationSpec           `yaml:"operations"`
	SchemaCheck        SQLSchemaCheckSpec           `yaml:"schema_check"`

	// usedVariants records each (variant, dialect) a text expanded during validation used.
	usedVariants map[[2]string]bool
}

// SQLMigrateLockSpec is the lock Migrate holds while it applies migrations: the identities
// every client of one major version must share.
type SQLMigrateLockSpec struct {
	Key      int64  `yaml:"key"`       // PostgreSQL advisory lock key
	Name     string `yaml:"name"`      // MySQL/MariaDB GET_LOCK name
	TimeoutS int64  `yaml:"timeout_s"` // how long GET_LOCK waits, in seconds
}

// SQLDialectSpec describes how one dialect is driven.
type SQLDialectSpec struct {
	Engine        string   `yaml:"engine"`
	SQLPackage    string   `yaml:"sql_package"`
	Begin         string   `yaml:"begin"`
	SessionSetup  []string `yaml:"session_setup"`
	ChangeCounter string   `yaml:"change_counter"`
	DatabaseFile  string   `yaml:"database_file"`
	JournalMode   string   `yaml:"journal_mode"`
	JournalWAL    string   `yaml:"journal_wal"`
	ObjectCount   string   `yaml:"object_count"`
	Listen        []string `yaml:"listen"`
	ListenLease   string   `yaml:"listen_lease"`
	UnlistenLease string   `yaml:"unlisten_lease"`
	ListenGroup   string   `yaml:"listen_group"`
	UnlistenGroup string   `yaml:"unlisten_group"`
	MigrateLock   string   `yaml:"migrate_lock"`
	MigrateUnlock string   `yaml:"migrate_unlock"`
	WakeLock      string   `yaml:"wake_lock"`
	WakeUnlock    string   `yaml:"wake_unlock"`
	WakeConnID    string   `yaml:"wake_conn_id"`
	WakeConnHost  string   `yaml:"wake_conn_host"`
	WakeKill      string   `yaml:"wake_kill"`
	WakeLockConn  string   `yaml:"wake_lock_conn"`
	WakeKillQuery string   `yaml:"wake_kill_query"`
	// ReadOnlyCheck reads whether the server takes writes: one row of one text column, empty
	// when it does, otherwise why not (the client's outage probe runs it).
	ReadOnlyCheck string `yaml:"read_only_check"`
	// ReadOnlyWriteCheck is a write that changes nothing, run when ReadOnlyCheck reports the
	// server read-only: the server taking it means the user's writes pass the read-only
	// setting (empty: none; needs ReadOnlyCheck).
	ReadOnlyWriteCheck string `yaml:"read_only_write_check"`
	// IdleTxTimeout bounds how long the server keeps a connection idle inside a transaction:
	// one statement with one parameter, the bound in milliseconds (empty: the dialect has none).
	// On MySQL/MariaDB it sets the connection's session variable; on PostgreSQL it lasts until
	// the end of the transaction it is sent in (set_config's is_local), with BEGIN.
	IdleTxTimeout string `yaml:"idle_tx_timeout"`
	// WakeFreeLeases reads the free leases among a set of names: {{names}} stands for one
	// parameter per name (expanded by the generated wire.SQLDialect.WakeFreeLeases).
	WakeFreeLeases string `yaml:"wake_free_leases"`
	TableOptions   string `yaml:"table_options"`
	InlineIndexes  bool   `yaml:"inline_indexes"`
}

// SQLTable is one table of the schema.
type SQLTable struct {
	Name string `yaml:"name"`
	// Migration names the later migration that creates the table (empty: the first).
	Migration  string      `yaml:"migration"`
	Doc        string      `yaml:"doc"`
	Columns    []SQLColumn `yaml:"columns"`
	PrimaryKey []string    `yaml:"primary_key"`
	Indexes    []SQLIndex  `yaml:"indexes"`
}

// SQLLaterMigration is one migration of the lease schema after the first.
type SQLLaterMigration struct {
	SchemaVersion int    `yaml:"schema_version"`
	Migration     string `yaml:"migration"`
}

// SQLColumn is one column; Type names an entry of the spec's types.
type SQLColumn struct {
	Name       string         `yaml:"name"`
	Type       string         `yaml:"type"`
	Nullable   bool           `yaml:"nullable"`
	References *SQLReferences `yaml:"references"`
}

// SQLReferences is a foreign key from a column to a table's column.
type SQLReferences struct {
	Table      string `yaml:"table"`
	Column     string `yaml:"column"`
	OnDelete   string `yaml:"on_delete"` // set_null | cascade
	Constraint string `yaml:"constraint"`
}

// SQLIndex is a secondary index.
type SQLIndex struct {
	Name    string   `yaml:"name"`
	Columns []string `yaml:"columns"`
}

// SQLStatement is one sqlc query, shared by the dialects it lists.
type SQLStatement struct {
	Name     string   `yaml:"name"`
	Dialects []string `yaml:"dialects"`
	Returns  string   `yaml:"returns"`
	Doc      string   `yaml:"doc"`
	SQL      string   `yaml:"sql"`
}

// SQLOperationSpec is one SPI operation: its statements in order.
type SQLOperationSpec struct {
	Name        string   `yaml:"name"`
	Transaction []string `yaml:"transaction"`
	Batch       []string `yaml:"batch"`
	// Pipeline: on these dialects (of Transaction, pgx/v5) the transaction is pipelined: a step
	// marked pipeline is sent in the previous step's round trip, BEGIN in the first one's, and
	// COMMIT in the last one's when no decision can follow it.
	Pipeline   []string       `yaml:"pipeline"`
	First      *SQLFirstSpec  `yaml:"first"`
	Statements []SQLStepEntry `yaml:"statements"`
}

// SQLFirstSpec is an operation's first try on some dialects: another operation run on its own
// before the operation's steps, whose outcome is the reply unless it is one of Continue.
type SQLFirstSpec struct {
	Operation string   `yaml:"operation"`
	Dialects  []string `yaml:"dialects"`
	Continue  []string `yaml:"continue"`
}

// SQLDecisionSpec is a named decision: the backend's function of that name reads the values
// the statements returned and answers one of these outcomes.
type SQLDecisionSpec struct {
	Name string `yaml:"name"`
	Doc  string `yaml:"doc"`
	// Reply: outcomes that end the operation (its reply is decided).
	Reply []string `yaml:"reply"`
	// Continue: outcomes after which the later steps run (those with when: <outcome> only
	// after that outcome).
	Continue []string `yaml:"continue"`
}

// SQLStepEntry names a statement of an operation, optionally narrowed to some dialects, with
// what decides after it. In YAML it is either the statement's name or the long form.
type SQLStepEntry struct {
	Name     string   `yaml:"name"`
	Dialects []string `yaml:"dialects"`
	// NoRows: a "one" statement that returns no row ends the operation with this outcome.
	NoRows string `yaml:"no_rows"`
	// Decide names the decision that reads the values after the statement.
	Decide string `yaml:"decide"`
	// When: the step runs only after this outcome.
	When string `yaml:"when"`
	// If: the step runs only when this parameter is given (non-empty).
	If string `yaml:"if"`
	// Repeat: the step runs again while its decision answers Outcome, Attempts times in all.
	Repeat *SQLRepeat `yaml:"repeat"`
	// Pipeline: on the operation's pipeline dialects the statement is sent with the previous
	// step's, in one round trip, before that one's result is read.
	Pipeline bool `yaml:"pipeline"`
}

// SQLRepeat bounds how often a step runs again after one outcome of its decision.
type SQLRepeat struct {
	Outcome  string `yaml:"outcome"`
	Attempts int    `yaml:"attempts"`
}

// outcomes lists every outcome of the decision, reply ones first.
func (d SQLDecisionSpec) outcomes() []string { return append(slices.Clone(d.Reply), d.Continue...) }

// UnmarshalYAML accepts a bare statement name or the long form.
func (e *SQLStepEntry) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		e.Name = n.Value
		return nil
	}
	type plain SQLStepEntry
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*e = SQLStepEntry(p)
	return nil
}

var (
	sqlPlaceholderRE = regexp.MustCompile(`\{\{([^{}]*)\}\}`)
	// sqlTypeRE is the column types the generator accepts: the base types every dialect's
	// Go mapping handles, optionally followed by a character set and collation.
	sqlTypeRE = regexp.MustCompile(`^(VARCHAR\([1-9][0-9]*\)|TEXT|BIGINT|INTEGER)( (CHARACTER SET [a-z0-9]+ )?COLLATE ("C"|BINARY|[a-z0-9_]+))?$`)
	// sqlIntTypeRE is the types a millisecond, token or version column may have.
	sqlIntTypeRE = regexp.MustCompile(`^(BIGINT|INTEGER)$`)
	// sqlChannelRE is a PostgreSQL channel name that needs no quoting.
	sqlChannelRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
)

// LoadSQL loads and validates spec/sql.yaml.
func LoadSQL(specDir string) (*SQLSpec, error) {
	var s SQLSpec
	if err := loadYAML(specDir, sqlFile, &s); err != nil {
		return nil, err
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// sqlInt64Column reports whether a column holds a millisecond value, a token or a version: those
// must be 64-bit integers.
// checkSQLColumn checks column c (at field cf of file f) against the rules of every declared
// table, spec/sql.yaml's and spec/fence.yaml's: an identifier, not a duplicate within its table
// (cols records the names seen), a type of spec/sql.yaml's types, and a 64-bit integer on every
// dialect where it holds a token, version or millisecond value.
func checkSQLColumn(f, cf string, c SQLColumn, types map[string]map[string]string, cols map[string]bool) error {
	if err := checkIdent(f, cf+".name", c.Name); err != nil {
		return err
	}
	if cols[c.Name] {
		return specErr(f, cf+".name", "duplicate column %s", c.Name)
	}
	cols[c.Name] = true
	ty, ok := types[c.Type]
	if !ok {
		return specErr(f, cf+".type", "bad column type %q: not one of spec/sql.yaml's types", c.Type)
	}
	if sqlInt64Column(c.Name) {
		for _, d := range sqlDialects {
			if !sqlIntTypeRE.MatchString(ty[d]) {
				return specErr(f, cf+".type", "%s holds a token, version or millisecond value and must be a 64-bit integer on %s, got %q", c.Name, d, ty[d])
			}
		}
	}
	return nil
}

func sqlInt64Column(name string) bool {
	return strings.HasSuffix(name, "_ms") || name == "token" || name == "version"
}

func (s *SQLSpec) validate() error {
	f := sqlFile
	if s.SchemaVersion < 1 || s.SchemaVersion > 9999 {
		return specErr(f, "schema_version", "must be in [1, 9999], got %d", s.SchemaVersion)
	}
	if err := checkIdent(f, "migration", s.Migration); err != nil {
		return err
	}
	if !sqlChannelRE.MatchString(s.ReleaseChannel) {
		return specErr(f, "release_channel", "%q is not a plain channel name", s.ReleaseChannel)
	}
	if !sqlChannelRE.MatchString(s.GroupChannel) || s.GroupChannel == s.ReleaseChannel {
		return specErr(f, "group_channel", "%q is not a plain channel name distinct from release_channel", s.GroupChannel)
	}
	// A lease channel is the prefix and 32 hex digits: a plain identifier of at most 63 bytes
	// (PostgreSQL's limit), which no other channel may look like.
	if lp := s.LeaseChannelPrefix; !s.ownChannelPrefixOK(lp) {
		return specErr(f, "lease_channel_prefix", "%q is not a plain channel name of at most 31 bytes that neither release_channel nor group_channel starts with", lp)
	}
	// So is a group's own channel, which no other channel may look like either.
	if gp, lp := s.GroupChannelPrefix, s.LeaseChannelPrefix; !s.ownChannelPrefixOK(gp) ||
		strings.HasPrefix(gp, lp) || strings.HasPrefix(lp, gp) {
		return specErr(f, "group_channel_prefix", "%q is not a plain channel name of at most 31 bytes that neither release_channel nor group_channel starts with, and neither starts nor is started by lease_channel_prefix", gp)
	}

	ml := s.MigrateLock
	if ml.Key == 0 {
		return specErr(f, "migrate_lock.key", "is missing or 0")
	}
	if !sqlChannelRE.MatchString(ml.Name) {
		return specErr(f, "migrate_lock.name", "%q is not a plain lock name", ml.Name)
	}
	if ml.TimeoutS < 1 {
		return specErr(f, "migrate_lock.timeout_s", "must be at least 1, got %d", ml.TimeoutS)
	}
	for _, st := range []struct{ key, stmt string }{{"commit", s.Commit}, {"rollback", s.Rollback}} {
		if strings.TrimSpace(st.stmt) == "" || strings.Contains(st.stmt, ";") {
			return specErr(f, st.key, "must be one non-empty statement without ';'")
		}
	}

	// Dialects: exactly the known ones.
	for _, name := range sqlSortedKeys(s.Dialects) {
		if !slices.Contains(sqlDialects, name) {
			return specErr(f, "dialects."+name, "unknown dialect (want one of %s)", strings.Join(sqlDialects, ", "))
		}
	}
	for _, d := range sqlDialects {
		ds, ok := s.Dialects[d]
		if !ok {
			return specErr(f, "dialects", "missing dialect %s", d)
		}
		field := "dialects." + d
		if ds.Engine != sqlEngines[d] {
			return specErr(f, field+".engine", "must be %q, got %q", sqlEngines[d], ds.Engine)
		}
		if !slices.Contains(sqlPackages[d], ds.SQLPackage) {
			return specErr(f, field+".sql_package", "must be one of %q, got %q", sqlPackages[d], ds.SQLPackage)
		}
		if strings.TrimSpace(ds.Begin) == "" {
			return specErr(f, field+".begin", "is empty")
		}
		for i, st := range ds.SessionSetup {
			if strings.TrimSpace(st) == "" || strings.Contains(st, ";") {
				return specErr(f, fmt.Sprintf("%s.session_setup[%d]", field, i), "must be one non-empty statement without ';'")
			}
		}
		for _, st := range []struct{ key, stmt string }{{"change_counter", ds.ChangeCounter}, {"database_file", ds.DatabaseFile}, {"journal_mode", ds.JournalMode}, {"journal_wal", ds.JournalWAL}, {"object_count", ds.ObjectCount}, {"wake_lock", ds.WakeLock}, {"wake_unlock", ds.WakeUnlock}, {"wake_conn_id", ds.WakeConnID}, {"wake_conn_host", ds.WakeConnHost}, {"wake_kill", ds.WakeKill}, {"wake_lock_conn", ds.WakeLockConn}, {"wake_kill_query", ds.WakeKillQuery}, {"read_only_check", ds.ReadOnlyCheck}, {"read_only_write_check", ds.ReadOnlyWriteCheck}, {"idle_tx_timeout", ds.IdleTxTimeout}} {
			if strings.Contains(st.stmt, ";") || (st.stmt != "" && strings.TrimSpace(st.stmt) == "") {
				return specErr(f, field+"."+st.key, "must be one statement without ';'")
			}
		}
		if ds.ReadOnlyWriteCheck != "" && ds.ReadOnlyCheck == "" {
			return specErr(f, field+".read_only_write_check", "needs read_only_check")
		}
		for i, st := range ds.Listen {
			lf := fmt.Sprintf("%s.listen[%d]", field, i)
			if strings.TrimSpace(st) == "" || strings.Contains(st, ";") {
				return specErr(f, lf, "must be one non-empty statement without ';'")
			}
			if _, err := s.expand(lf, st, d); err != nil {
				return err
			}
		}
		if (ds.ListenLease == "") != (ds.UnlistenLease == "") {
			return specErr(f, field+".unlisten_lease", "listen_lease and unlisten_lease go together")
		}
		if (ds.ListenGroup == "") != (ds.UnlistenGroup == "") {
			return specErr(f, field+".unlisten_group", "listen_group and unlisten_group go together")
		}
		for _, st := range []struct{ key, stmt, ph string }{
			{"listen_lease", ds.ListenLease, leaseChannelIdent}, {"unlisten_lease", ds.UnlistenLease, leaseChannelIdent},
			{"listen_group", ds.ListenGroup, groupOwnChannelIdent}, {"unlisten_group", ds.UnlistenGroup, groupOwnChannelIdent},
		} {
			if st.stmt == "" {
				continue
			}
			if _, err := s.expandOwn(field+"."+st.key, st.stmt, d, st.ph); err != nil {
				return err
			}
		}
		if (ds.MigrateLock == "") != (ds.MigrateUnlock == "") {
			return specErr(f, field+".migrate_unlock", "migrate_lock and migrate_unlock go together")
		}
		for _, st := range []struct{ key, stmt string }{{"migrate_lock", ds.MigrateLock}, {"migrate_unlock", ds.MigrateUnlock}} {
			if strings.Contains(st.stmt, ";") || (st.stmt != "" && strings.TrimSpace(st.stmt) == "") {
				return specErr(f, field+"."+st.key, "must be one statement without ';'")
			}
			if _, err := s.expand(field+"."+st.key, st.stmt, d); err != nil {
				return err
			}
		}
		if (ds.WakeLock == "") != (ds.WakeUnlock == "") {
			return specErr(f, field+".wake_lock", "wake_lock and wake_unlock go together")
		}
		if (ds.WakeConnID == "") != (ds.WakeKill == "") || (ds.WakeConnID == "") != (ds.WakeConnHost == "") || (ds.WakeConnID == "") != (ds.WakeLockConn == "") || (ds.WakeConnID != "" && ds.WakeLock == "") {
			return specErr(f, field+".wake_kill", "wake_conn_id, wake_conn_host, wake_kill and wake_lock_conn go together, and with wake_lock")
		}
		if ds.WakeKillQuery != "" && ds.WakeConnID == "" {
			return specErr(f, field+".wake_kill_query", "wake_kill_query needs wake_conn_id, wake_conn_host and wake_kill")
		}
		if ds.WakeFreeLeases != "" {
			if ds.WakeLock == "" {
				return specErr(f, field+".wake_free_leases", "wake_free_leases goes with wake_lock")
			}
			if _, err := s.expandOwn(field+".wake_free_leases", ds.WakeFreeLeases, d, wakeNames); err != nil {
				return err
			}
		}
		if ds.InlineIndexes && d == "postgres" {
			return specErr(f, field+".inline_indexes", "PostgreSQL cannot declare indexes inside CREATE TABLE")
		}
	}

	// Variants: known dialects only, and no placeholders inside. Which dialects a variant must
	// give is decided by use: expand refuses a use without a value, and checkVariantsUsed a value
	// without a use.
	for _, name := range sqlSortedKeys(s.Variants) {
		field := "variants." + name
		if err := checkIdent(f, field, name); err != nil {
			return err
		}
		if sqlBuiltinPlaceholder(name) {
			return specErr(f, field, "%q is a built-in placeholder", name)
		}
		for _, d := range sqlSortedKeys(s.Variants[name]) {
			if !slices.Contains(sqlDialects, d) {
				return specErr(f, field+"."+d, "unknown dialect")
			}
			if sqlPlaceholderRE.MatchString(s.Variants[name][d]) {
				return specErr(f, field+"."+d, "variants cannot contain placeholders")
			}
		}
	}

	// Types.
	for _, name := range sqlSortedKeys(s.Types) {
		field := "types." + name
		if err := checkIdent(f, field, name); err != nil {
			return err
		}
		if err := s.perDialect(field, s.Types[name], false); err != nil {
			return err
		}
		for _, d := range sqlDialects {
			if !sqlTypeRE.MatchString(s.Types[name][d]) {
				return specErr(f, field+"."+d, "bad column type %q", s.Types[name][d])
			}
		}
	}

	// Later migrations: increasing versions, distinct names.
	prev, names := s.SchemaVersion, map[string]bool{s.Migration: true}
	for i, m := range s.LaterMigrations {
		field := fmt.Sprintf("later_migrations[%d]", i)
		if m.SchemaVersion <= prev || m.SchemaVersion > 9999 {
			return specErr(f, field+".schema_version", "must be above %d (and at most 9999), got %d", prev, m.SchemaVersion)
		}
		if err := checkIdent(f, field+".migration", m.Migration); err != nil {
			return err
		}
		if names[m.Migration] {
			return specErr(f, field+".migration", "duplicate migration %s", m.Migration)
		}
		prev, names[m.Migration] = m.SchemaVersion, true
	}
	for i, t := range s.Tables {
		if t.Migration != "" && (t.Migration == s.Migration || !names[t.Migration]) {
			return specErr(f, fmt.Sprintf("tables[%d].migration", i), "%q is not one of later_migrations", t.Migration)
		}
	}

	// Tables.
	if len(s.Tables) == 0 {
		return specErr(f, "tables", "is empty")
	}
	tables := map[string]*SQLTable{}
	indexNames := map[string]bool{}
	for i := range s.Tables {
		t := &s.Tables[i]
		field := fmt.Sprintf("tables[%d]", i)
		if err := checkIdent(f, field+".name", t.Name); err != nil {
			return err
		}
		if tables[t.Name] != nil {
			return specErr(f, field+".name", "duplicate table %s", t.Name)
		}
		field = "tables." + t.Name
		if len(t.Columns) == 0 {
			return specErr(f, field+".columns", "is empty")
		}
		cols := map[string]bool{}
		for j, c := range t.Columns {
			cf := fmt.Sprintf("%s.columns[%d]", field, j)
			if err := checkSQLColumn(f, cf, c, s.Types, cols); err != nil {
				return err
			}
			if r := c.References; r != nil {
				rt := tables[r.Table]
				if rt == nil {
					return specErr(f, cf+".references.table", "%q is not a table declared before %s", r.Table, t.Name)
				}
				if len(rt.PrimaryKey) != 1 || rt.PrimaryKey[0] != r.Column {
					return specErr(f, cf+".references.column", "%s.%s is not the single-column primary key of %s", r.Table, r.Column, r.Table)
				}
				if r.OnDelete != "set_null" && r.OnDelete != "cascade" {
					return specErr(f, cf+".references.on_delete", "must be set_null or cascade, got %q", r.OnDelete)
				}
				if r.OnDelete == "set_null" && !c.Nullable {
					return specErr(f, cf+".references.on_delete", "set_null needs a nullable column")
				}
				if err := checkIdent(f, cf+".references.constraint", r.Constraint); err != nil {
					return err
				}
				if indexNames[r.Constraint] {
					return specErr(f, cf+".references.constraint", "duplicate name %s", r.Constraint)
				}
				indexNames[r.Constraint] = true
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
		for j, ix := range t.Indexes {
			xf := fmt.Sprintf("%s.indexes[%d]", field, j)
			if err := checkIdent(f, xf+".name", ix.Name); err != nil {
				return err
			}
			if indexNames[ix.Name] {
				return specErr(f, xf+".name", "duplicate name %s", ix.Name)
			}
			indexNames[ix.Name] = true
			if len(ix.Columns) == 0 {
				return specErr(f, xf+".columns", "is empty")
			}
			for k, c := range ix.Columns {
				if !cols[c] {
					return specErr(f, fmt.Sprintf("%s.columns[%d]", xf, k), "unknown column %q", c)
				}
			}
		}
		tables[t.Name] = t
	}
	if vt := tables[s.VersionTable]; vt == nil {
		return specErr(f, "version_table", "%q is not a declared table", s.VersionTable)
	}
	if _, err := s.expandAll("version_insert", s.VersionInsert); err != nil {
		return err
	}

	// Statements.
	stmts := map[string]*SQLStatement{}
	for i := range s.Statements {
		st := &s.Statements[i]
		field := fmt.Sprintf("statements[%d]", i)
		if err := checkIdent(f, field+".name", st.Name); err != nil {
			return err
		}
		if stmts[st.Name] != nil {
			return specErr(f, field+".name", "duplicate statement %s", st.Name)
		}
		stmts[st.Name] = st
		field = "statements." + st.Name
		if len(st.Dialects) == 0 {
			st.Dialects = slices.Clone(sqlDialects)
		}
		if err := sqlCheckDialects(field+".dialects", st.Dialects); err != nil {
			return err
		}
		switch st.Returns {
		case "one", "many", "exec":
		default:
			return specErr(f, field+".returns", "must be one, many or exec, got %q", st.Returns)
		}
		if strings.TrimSpace(st.SQL) == "" {
			return specErr(f, field+".sql", "is empty")
		}
		if strings.Contains(strings.TrimRight(strings.TrimSpace(st.SQL), ";"), ";") {
			return specErr(f, field+".sql", "holds more than one statement")
		}
		for _, d := range st.Dialects {
			if _, err := s.expand(field+".sql", st.SQL, d); err != nil {
				return err
			}
		}
	}

	// Decisions.
	decisions := map[string]SQLDecisionSpec{}
	for i, dc := range s.Decisions {
		field := fmt.Sprintf("decisions[%d]", i)
		if err := checkIdent(f, field+".name", dc.Name); err != nil {
			return err
		}
		if _, dup := decisions[dc.Name]; dup {
			return specErr(f, field+".name", "duplicate decision %s", dc.Name)
		}
		decisions[dc.Name] = dc
		field = "decisions." + dc.Name
		if len(dc.outcomes()) == 0 {
			return specErr(f, field, "has no outcome")
		}
		seen := map[string]bool{}
		for _, o := range dc.outcomes() {
			if err := checkIdent(f, field+".outcomes", o); err != nil {
				return err
			}
			if seen[o] {
				return specErr(f, field, "outcome %s listed twice", o)
			}
			seen[o] = true
		}
	}
	usedDecisions := map[string]bool{}

	// Operations.
	if len(s.Operations) == 0 {
		return specErr(f, "operations", "is empty")
	}
	ops := map[string]bool{}
	used := map[string]bool{}
	for i, op := range s.Operations {
		field := fmt.Sprintf("operations[%d]", i)
		if err := checkIdent(f, field+".name", op.Name); err != nil {
			return err
		}
		if ops[op.Name] {
			return specErr(f, field+".name", "duplicate operation %s", op.Name)
		}
		ops[op.Name] = true
		field = "operations." + op.Name
		if err := sqlCheckDialects(field+".transaction", op.Transaction); err != nil {
			return err
		}
		for j, e := range op.Statements {
			ef := fmt.Sprintf("%s.statements[%d]", field, j)
			st := stmts[e.Name]
			if st == nil {
				return specErr(f, ef, "unknown statement %q", e.Name)
			}
			used[e.Name] = true
			if err := sqlCheckDialects(ef+".dialects", e.Dialects); err != nil {
				return err
			}
			for _, d := range e.Dialects {
				if !slices.Contains(st.Dialects, d) {
					return specErr(f, ef+".dialects", "statement %s has no %s variant", e.Name, d)
				}
			}
			if err := s.validateStep(ef, e, st, decisions, usedDecisions); err != nil {
				return err
			}
		}
		if err := sqlCheckDialects(field+".batch", op.Batch); err != nil {
			return err
		}
		if err := sqlCheckDialects(field+".pipeline", op.Pipeline); err != nil {
			return err
		}
		if err := s.validateFirst(field+".first", op); err != nil {
			return err
		}
		for _, d := range sqlDialects {
			steps := s.stepEntries(op, d)
			if len(steps) == 0 {
				return specErr(f, field, "missing variant for %s", d)
			}
			if err := s.validateFlow(field, op, d, steps, decisions); err != nil {
				return err
			}
		}
	}
	for _, dc := range s.Decisions {
		if !usedDecisions[dc.Name] {
			return specErr(f, "decisions."+dc.Name, "is used by no step")
		}
	}
	for _, st := range s.Statements {
		if !used[st.Name] {
			return specErr(f, "statements."+st.Name, "is used by no operation")
		}
	}
	if err := s.validateSchemaCheck(); err != nil {
		return err
	}
	return s.checkVariantsUsed()
}

// checkVariantsUsed fails on a variant value that no text of its dialect used during
// validation (a declared difference that does not exist on the wire).
func (s *SQLSpec) checkVariantsUsed() error {
	for _, name := range sqlSortedKeys(s.Variants) {
		for _, d := range sqlDialects {
			if _, ok := s.Variants[name][d]; ok && !s.usedVariants[[2]string{name, d}] {
				return specErr(sqlFile, "variants."+name+"."+d, "is used by no %s statement (drop it, or use {{%s}} where the %s text differs)", d, name, d)
			}
		}
	}
	return nil
}

// sqlCheckDialects checks a list of dialect names for unknown and repeated entries.
func sqlCheckDialects(field string, ds []string) error {
	seen := map[string]bool{}
	for i, d := range ds {
		if !slices.Contains(sqlDialects, d) {
			return specErr(sqlFile, fmt.Sprintf("%s[%d]", field, i), "unknown dialect %q", d)
		}
		if seen[d] {
			return specErr(sqlFile, fmt.Sprintf("%s[%d]", field, i), "dialect %s listed twice", d)
		}
		seen[d] = true
	}
	return nil
}

// perDialect checks that m names every dialect and nothing else; empty values are allowed only
// when allowEmpty.
func (s *SQLSpec) perDialect(field string, m map[string]string, allowEmpty bool) error {
	for _, k := range sqlSortedKeys(m) {
		if !slices.Contains(sqlDialects, k) {
			return specErr(sqlFile, field+"."+k, "unknown dialect")
		}
	}
	for _, d := range sqlDialects {
		v, ok := m[d]
		if !ok {
			return specErr(sqlFile, field, "missing variant for %s", d)
		}
		if !allowEmpty && strings.TrimSpace(v) == "" {
			return specErr(sqlFile, field+"."+d, "is empty")
		}
	}
	return nil
}

func sqlBuiltinPlaceholder(name string) bool {
	switch name {
	case "release_channel", "group_channel", "release_channel_ident", "group_channel_ident", "schema_version",
		"lease_channel_prefix", "lease_channel_ident", "group_channel_prefix", "group_own_channel_ident",
		"migrate_lock_key", "migrate_lock_name", "migrate_lock_timeout_s":
		return true
	}
	return false
}

// ownChannelPrefixOK reports whether p can start a lease's or a group's own channel (p and 32 hex
// digits): a plain channel name that stays within PostgreSQL's 63-byte identifier limit, and
// that neither shared channel (release_channel, group_channel) starts with.
func (s *SQLSpec) ownChannelPrefixOK(p string) bool {
	return sqlChannelRE.MatchString(p) && len(p)+32 <= 63 &&
		!strings.HasPrefix(s.ReleaseChannel, p) && !strings.HasPrefix(s.GroupChannel, p)
}

// The placeholders that place one lease's or one group's own channel, an identifier, in the
// dialect texts that LISTEN and UNLISTEN it (and nowhere else).
const (
	leaseChannelIdent    = "lease_channel_ident"
	groupOwnChannelIdent = "group_own_channel_ident"
	// wakeNames is the placeholder of wake_free_leases for its list of name parameters.
	wakeNames = "names"
)

// expandOwn expands a listen_lease, unlisten_lease, listen_group or unlisten_group text, which
// names the channel once with placeholder ph (leaseChannelIdent or groupOwnChannelIdent): the
// expanded text before and after it.
func (s *SQLSpec) expandOwn(field, text, d, ph string) ([2]string, error) {
	parts := strings.Split(text, "{{"+ph+"}}")
	if len(parts) != 2 || strings.TrimSpace(text) == "" || strings.Contains(text, ";") {
		return [2]string{}, specErr(sqlFile, field, "must be one statement without ';' that names {{%s}} once", ph)
	}
	var out [2]string
	for i, p := range parts {
		x, err := s.expand(field, p, d)
		if err != nil {
			return [2]string{}, err
		}
		out[i] = x
	}
	return out, nil
}

// expand substitutes every placeholder of text for dialect d.
func (s *SQLSpec) expand(field, text, d string) (string, error) {
	var err error
	out := sqlPlaceholderRE.ReplaceAllStringFunc(text, func(m string) string {
		name := strings.TrimSpace(m[2 : len(m)-2])
		switch name {
		case "release_channel":
			return "'" + s.ReleaseChannel + "'"
		case "group_channel":
			return "'" + s.GroupChannel + "'"
		case "release_channel_ident":
			return s.ReleaseChannel
		case "group_channel_ident":
			return s.GroupChannel
		case "lease_channel_prefix":
			return "'" + s.LeaseChannelPrefix + "'"
		case "lease_channel_ident":
			if err == nil {
				err = specErr(sqlFile, field, "{{lease_channel_ident}} is only for listen_lease and unlisten_lease")
			}
			return m
		case "group_channel_prefix":
			return "'" + s.GroupChannelPrefix + "'"
		case "group_own_channel_ident":
			if err == nil {
				err = specErr(sqlFile, field, "{{group_own_channel_ident}} is only for listen_group and unlisten_group")
			}
			return m
		case "schema_version":
			return strconv.Itoa(s.SchemaVersion)
		case "migrate_lock_key":
			return strconv.FormatInt(s.MigrateLock.Key, 10)
		case "migrate_lock_name":
			return "'" + s.MigrateLock.Name + "'"
		case "migrate_lock_timeout_s":
			return strconv.FormatInt(s.MigrateLock.TimeoutS, 10)
		}
		v, ok := s.Variants[name]
		if !ok {
			if err == nil {
				err = specErr(sqlFile, field, "unknown placeholder {{%s}}", name)
			}
			return m
		}
		val, ok := v[d]
		if !ok {
			if err == nil {
				err = specErr(sqlFile, "variants."+name, "missing variant for %s (used by %s)", d, field)
			}
			return m
		}
		if s.usedVariants == nil {
			s.usedVariants = map[[2]string]bool{}
		}
		s.usedVariants[[2]string{name, d}] = true
		return val
	})
	if err != nil {
		return "", err
	}
	if strings.Contains(out, "{{") || strings.Contains(out, "}}") {
		return "", specErr(sqlFile, field, "unbalanced placeholder braces")
	}
	return out, nil
}

func (s *SQLSpec) expandAll(field, text string) (map[string]string, error) {
	out := map[string]string{}
	for _, d := range sqlDialects {
		v, err := s.expand(field, text, d)
		if err != nil {
			return nil, err
		}
		out[d] = v
	}
	return out, nil
}

// steps lists the statements op runs on dialect d, in order.
func (s *SQLSpec) steps(op SQLOperationSpec, d string) []*SQLStatement {
	var out []*SQLStatement
	for _, e := range s.stepEntries(op, d) {
		out = append(out, s.statement(e.Name))
	}
	return out
}

// stepEntries lists the step entries of op that apply to dialect d, in order.
func (s *SQLSpec) stepEntries(op SQLOperationSpec, d string) []SQLStepEntry {
	var out []SQLStepEntry
	for _, e := range op.Statements {
		st := s.statement(e.Name)
		if st == nil || !slices.Contains(st.Dialects, d) {
			continue
		}
		if len(e.Dialects) > 0 && !slices.Contains(e.Dialects, d) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// validateStep checks one step's attributes against its statement and the decisions.
func (s *SQLSpec) validateStep(field string, e SQLStepEntry, st *SQLStatement, decisions map[string]SQLDecisionSpec, used map[string]bool) error {
	f := sqlFile
	if e.NoRows != "" {
		if st.Returns != "one" {
			return specErr(f, field+".no_rows", "statement %s returns %s; only a one statement can return no row", e.Name, st.Returns)
		}
		if err := checkIdent(f, field+".no_rows", e.NoRows); err != nil {
			return err
		}
	}
	if e.Decide != "" {
		dc, ok := decisions[e.Decide]
		if !ok {
			return specErr(f, field+".decide", "unknown decision %q", e.Decide)
		}
		used[e.Decide] = true
		if e.Repeat != nil {
			if !slices.Contains(dc.outcomes(), e.Repeat.Outcome) {
				return specErr(f, field+".repeat.outcome", "%q is not an outcome of decision %s", e.Repeat.Outcome, e.Decide)
			}
			if e.Repeat.Attempts < 2 {
				return specErr(f, field+".repeat.attempts", "must be at least 2, got %d", e.Repeat.Attempts)
			}
		}
	} else if e.Repeat != nil {
		return specErr(f, field+".repeat", "needs decide")
	}
	if e.If != "" {
		for _, d := range st.Dialects {
			body, _ := s.expand(field, st.SQL, d) // validated
			if !strings.Contains(body, "sqlc.arg("+e.If+")") && !strings.Contains(body, "sqlc.slice("+e.If+")") {
				return specErr(f, field+".if", "%q is not a parameter of statement %s on %s", e.If, e.Name, d)
			}
		}
	}
	return nil
}

// validateFlow checks the steps op runs on dialect d: every when names an outcome that an
// earlier step's decision continues with, and a batch runs no step conditionally on an outcome.
func (s *SQLSpec) validateFlow(field string, op SQLOperationSpec, d string, steps []SQLStepEntry, decisions map[string]SQLDecisionSpec) error {
	f := sqlFile
	batch := slices.Contains(op.Batch, d)
	if batch && slices.Contains(op.Transaction, d) {
		return specErr(f, field+".batch", "%s: a batch runs in its own implicit transaction; drop it from transaction", d)
	}
	if batch && s.Dialects[d].SQLPackage != "pgx/v5" {
		return specErr(f, field+".batch", "%s: only a pgx/v5 dialect pipelines a batch", d)
	}
	if err := s.validatePipeline(field, op, d, steps); err != nil {
		return err
	}
	continues := map[string]bool{}
	for _, e := range steps {
		ef := fmt.Sprintf("%s.statements[%s]", field, e.Name)
		if e.When != "" && !continues[e.When] {
			return specErr(f, ef+".when", "on %s no earlier step's decision continues with %q", d, e.When)
		}
		if batch && (e.When != "" || e.Repeat != nil) {
			return specErr(f, ef, "on %s the operation is a batch: its steps run at once, with no when or repeat", d)
		}
		if e.Decide != "" {
			for _, o := range decisions[e.Decide].Continue {
				continues[o] = true
			}
		}
	}
	return nil
}

// validatePipeline checks op's pipelines on dialect d: only a transaction of a pgx/v5 dialect
// pipelines (its BEGIN and COMMIT join the statements' round trips), and a step joins the
// previous one's round trip only when whether it runs, and with what, is known before that
// round trip is sent: it has no when if a step of the same pipeline decides (the outcome it
// would test is not read yet), and no step before it in the pipeline repeats (a repeat runs
// that step again on its own, after the later one had run). A step that ends the operation
// before the last of its pipeline makes the backend roll the transaction back (the later
// statements ran), so a pipelined step must be harmless to run and undo.
func (s *SQLSpec) validatePipeline(field string, op SQLOperationSpec, d string, steps []SQLStepEntry) error {
	f := sqlFile
	on := slices.Contains(op.Pipeline, d)
	if on && !slices.Contains(op.Transaction, d) {
		return specErr(f, field+".pipeline", "%s: only a transaction is pipelined; add it to transaction", d)
	}
	if on && s.Dialects[d].SQLPackage != "pgx/v5" {
		return specErr(f, field+".pipeline", "%s: only a pgx/v5 dialect pipelines", d)
	}
	decides := false // a step of the current pipeline decides
	for i, e := range steps {
		ef := fmt.Sprintf("%s.statements[%s]", field, e.Name)
		if !e.Pipeline {
			decides = e.Decide != ""
			continue
		}
		if len(op.Pipeline) == 0 {
			return specErr(f, ef+".pipeline", "the operation pipelines on no dialect")
		}
		if !on {
			continue
		}
		if i == 0 {
			return specErr(f, ef+".pipeline", "on %s it is the first step: there is no previous one to join", d)
		}
		if steps[i-1].Repeat != nil {
			return specErr(f, ef+".pipeline", "on %s the previous step (%s) repeats: a repeated step ends its pipeline", d, steps[i-1].Name)
		}
		if e.When != "" && decides {
			return specErr(f, ef+".pipeline", "on %s it runs only when %q, which a decision of its own pipeline answers after the round trip", d, e.When)
		}
		decides = decides || e.Decide != ""
	}
	return nil
}

func (s *SQLSpec) statement(name string) *SQLStatement {
	for i := range s.Statements {
		if s.Statements[i].Name == name {
			return &s.Statements[i]
		}
	}
	return nil
}

func sqlSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// leaseMigrations splits the spec into its migrations, in order: the first (the tables
// without a migration name) and each later one with its tables. Each is a copy of s with its
// own version, name and tables.
func (s *SQLSpec) leaseMigrations() []*SQLSpec {
	var out []*SQLSpec
	part := func(version int, name, key string) {
		c := *s
		c.SchemaVersion, c.Migration, c.Tables = version, name, nil
		for _, t := range s.Tables {
			if t.Migration == key {
				c.Tables = append(c.Tables, t)
			}
		}
		out = append(out, &c)
	}
	part(s.SchemaVersion, s.Migration, "")
	for _, m := range s.LaterMigrations {
		part(m.SchemaVersion, m.Migration, m.Migration)
	}
	return out
}

// latest is the last migration of the lease schema: the one the lease backends need.
func (s *SQLSpec) latest() *SQLSpec {
	ms := s.leaseMigrations()
	return ms[len(ms)-1]
}

// migrationFile is the file name of the spec's migration.
func (s *SQLSpec) migrationFile() string {
	return fmt.Sprintf("%04d_%s.sql", s.SchemaVersion, s.Migration)
}

// ddlStatements renders the migration of dialect d as separate statements.
func (s *SQLSpec) ddlStatements(d string) []string {
	ds := s.Dialects[d]
	var out []string
	for _, t := range s.Tables {
		var lines []string
		for _, c := range t.Columns {
			null := " NOT NULL"
			if c.Nullable {
				null = "" // nullable by default; an explicit NULL confuses sqlc's SQLite parser
			}
			lines = append(lines, "    "+c.Name+" "+s.Types[c.Type][d]+null)
		}
		lines = append(lines, "    PRIMARY KEY ("+strings.Join(t.PrimaryKey, ", ")+")")
		if ds.InlineIndexes {
			for _, ix := range t.Indexes {
				lines = append(lines, "    INDEX "+ix.Name+" ("+strings.Join(ix.Columns, ", ")+")")
			}
		}
		for _, c := range t.Columns {
			if r := c.References; r != nil {
				action := map[string]string{"set_null": "SET NULL", "cascade": "CASCADE"}[r.OnDelete]
				lines = append(lines, fmt.Sprintf("    CONSTRAINT %s FOREIGN KEY (%s) REFERENCES %s (%s) ON DELETE %s",
					r.Constraint, c.Name, r.Table, r.Column, action))
			}
		}
		var b strings.Builder
		b.WriteString("CREATE TABLE IF NOT EXISTS " + t.Name + " (\n")
		b.WriteString(strings.Join(lines, ",\n"))
		b.WriteString("\n)")
		if ds.TableOptions != "" {
			b.WriteString(" " + ds.TableOptions)
		}
		out = append(out, b.String())
		if !ds.InlineIndexes {
			for _, ix := range t.Indexes {
				out = append(out, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)", ix.Name, t.Name, strings.Join(ix.Columns, ", ")))
			}
		}
	}
	ins, _ := s.expand("version_insert", s.VersionInsert, d) // validated
	out = append(out, ins)
	return out
}

// sqlDocLines wraps a doc string into SQL comment lines of at most about 100 characters.
func sqlDocLines(doc string) string {
	var b strings.Builder
	for _, para := range strings.Split(strings.TrimSpace(doc), "\n") {
		line := "--"
		for _, w := range strings.Fields(para) {
			if len(line) > 2 && len(line)+1+len(w) > 100 {
				b.WriteString(line + "\n")
				line = "--"
			}
			line += " " + w
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func genSQL(specDir string) ([]File, error) {
	s, err := LoadSQL(specDir)
	if err != nil {
		return nil, err
	}
	var files []File
	// The migrations in order: the lease schema, then spec/fence.yaml's fence table.
	fence, err := LoadFence(specDir, s)
	if err != nil {
		return nil, err
	}
	migrations := append(s.leaseMigrations(), fence.asSQL())
	slices.SortStableFunc(migrations, func(a, b *SQLSpec) int { return a.SchemaVersion - b.SchemaVersion })
	for i := 1; i < len(migrations); i++ {
		if migrations[i].SchemaVersion == migrations[i-1].SchemaVersion {
			return nil, specErr(sqlFile, "later_migrations", "schema version %d is used by both %s and %s", migrations[i].SchemaVersion, migrations[i-1].Migration, migrations[i].Migration)
		}
	}
	ddl := make([]map[string][]string, len(migrations))
	for _, d := range sqlDialects {
		for i, m := range migrations {
			if ddl[i] == nil {
				ddl[i] = map[string][]string{}
			}
			stmts := m.ddlStatements(d)
			ddl[i][d] = stmts
			var b strings.Builder
			b.WriteString(textHeader("--"))
			fmt.Fprintf(&b, "--\n-- Simba schema version %d for %s. Idempotent: applying it twice is harmless.\n", m.SchemaVersion, d)
			for _, st := range stmts {
				b.WriteString("\n")
				for _, t := range m.Tables {
					if strings.HasPrefix(st, "CREATE TABLE IF NOT EXISTS "+t.Name+" (") && t.Doc != "" {
						b.WriteString(sqlDocLines(t.Doc))
					}
				}
				b.WriteString(st + ";\n")
			}
			files = append(files, File{Path: "sql/schema/" + d + "/" + m.migrationFile(), Data: []byte(b.String())})
		}

		for _, st := range s.Statements {
			if !slices.Contains(st.Dialects, d) {
				continue
			}
			body, _ := s.expand("statements."+st.Name+".sql", st.SQL, d) // validated
			body = strings.TrimRight(strings.TrimSpace(body), ";")
			var q strings.Builder
			// A block comment: sqlc copies every "--" line before a query into the Go doc of its
			// method, but drops the lines of a multi-line block comment.
			q.WriteString("/*\n" + strings.TrimSpace(textHeader("")) + "\n*/\n\n")
			fmt.Fprintf(&q, "-- name: %s :%s\n", camel(st.Name), st.Returns)
			if st.Doc != "" {
				q.WriteString(sqlDocLines(st.Doc))
			}
			q.WriteString(body + ";\n")
			files = append(files, File{Path: "sql/queries/" + d + "/" + st.Name + ".sql", Data: []byte(q.String())})
		}
	}

	// sqlc.yaml
	var y strings.Builder
	y.WriteString(textHeader("#"))
	y.WriteString("# sqlc reads this from sql/ (go generate runs it from tools/).\nversion: \"2\"\nsql:\n")
	for _, d := range sqlDialects {
		ds := s.Dialects[d]
		fmt.Fprintf(&y, "  - engine: %s\n    schema: schema/%s\n    queries: queries/%s\n    gen:\n      go:\n        package: %s\n        out: ../generated/sqlc/%s\n",
			ds.Engine, d, d, d, d)
		if ds.SQLPackage != "database/sql" {
			fmt.Fprintf(&y, "        sql_package: %s\n", ds.SQLPackage)
		}
	}
	files = append(files, File{Path: "sql/sqlc.yaml", Data: []byte(y.String())})

	// sqlc-vet.yaml: the same queries against real servers with sqlc's db-prepare rule (every
	// statement must prepare on the dialect's server). The database URIs come from the
	// environment (tools/cmd/sqlcvet sets them after loading the migration into a scratch
	// schema); SQLite's in-memory database gets the migration from sqlc itself.
	var v strings.Builder
	v.WriteString(textHeader("#"))
	v.WriteString("# sqlc vet reads this from sql/ (make verify runs it through tools/cmd/sqlcvet).\nversion: \"2\"\nsql:\n")
	for _, d := range sqlDialects {
		fmt.Fprintf(&v, "  - engine: %s\n    schema: schema/%s\n    queries: queries/%s\n    database:\n      uri: \"${%s}\"\n    rules: [sqlc/db-prepare]\n",
			s.Dialects[d].Engine, d, d, SQLCVetURIEnv(d))
	}
	files = append(files, File{Path: "sql/sqlc-vet.yaml", Data: []byte(v.String())})

	embed, err := s.genEmbed(migrations, ddl)
	if err != nil {
		return nil, err
	}
	fenceWire, err := fence.genWire()
	if err != nil {
		return nil, err
	}
	files = append(files, fenceWire)
	wire, err := s.genWire()
	if err != nil {
		return nil, err
	}
	check, err := s.genSchemaCheck()
	if err != nil {
		return nil, err
	}
	return append(files, embed, wire, check), nil
}

// genEmbed writes sql/schema/embed.go: the migrations embedded, with their versions and
// statements per dialect. migrations[0] is s (the lease schema); ddl[i] are the statements of
// migrations[i] per dialect; the lease backends need s.latest().
func (s *SQLSpec) genEmbed(migrations []*SQLSpec, ddl []map[string][]string) (File, error) {
	f := jen.NewFilePathName("github.com/simba-go/simba/sql/schema", "schema")
	for _, line := range []string{
		"Package schema embeds Simba's SQL migrations, one directory per dialect (postgres, mysql,",
		"sqlite), and lists them with their versions and statements. Generated from spec/sql.yaml by",
		"simbagen; never edit it by hand.",
	} {
		f.PackageComment(line)
	}
	var patterns []string
	for _, d := range sqlDialects {
		patterns = append(patterns, d+"/*.sql")
	}
	f.Comment("FS holds the migration files, at <dialect>/<version>_<name>.sql.")
	f.Comment("//go:embed " + strings.Join(patterns, " "))
	f.Var().Id("FS").Qual("embed", "FS")

	f.Comment("Migration is one migration of one dialect.")
	f.Type().Id("Migration").Struct(
		jen.Comment("Version is the schema version the migration brings the database to."),
		jen.Id("Version").Int(),
		jen.Comment("Path is the file's path in FS, e.g. \""+sqlDialects[0]+"/"+s.migrationFile()+"\"."),
		jen.Id("Path").String(),
		jen.Comment("Statements are the file's statements, in order, without their terminating"),
		jen.Comment("semicolons, for drivers that run one statement per call."),
		jen.Id("Statements").Index().String(),
	)
	lineComments(f, "LatestVersion is the schema version the lease backends' statements need: a database at\nthis version or later works with them. Later migrations add tables for other parts of the\nlibrary (FenceVersion).")
	f.Const().Id("LatestVersion").Op("=").Lit(s.latest().SchemaVersion)
	for _, m := range migrations[1:] {
		need := "which\nthe lease backends need (LatestVersion or earlier)"
		src := "sql"
		if !slices.ContainsFunc(s.LaterMigrations, func(l SQLLaterMigration) bool { return l.Migration == m.Migration }) {
			need, src = "which\nthe lease backends do not need", m.Migration
		}
		lineComments(f, fmt.Sprintf("%sVersion is the schema version of the migration %s (spec/%s.yaml), %s.", camel(m.Migration), m.migrationFile(), src, need))
		f.Const().Id(camel(m.Migration) + "Version").Op("=").Lit(m.SchemaVersion)
	}

	var cases []jen.Code
	for _, d := range sqlDialects {
		var ms []jen.Code
		for i, m := range migrations {
			var sts []jen.Code
			for _, st := range ddl[i][d] {
				sts = append(sts, jen.Lit(st))
			}
			ms = append(ms, jen.Values(jen.Dict{
				jen.Id("Version"):    jen.Lit(m.SchemaVersion),
				jen.Id("Path"):       jen.Lit(d + "/" + m.migrationFile()),
				jen.Id("Statements"): jen.Index().String().Values(sts...),
			}))
		}
		cases = append(cases, jen.Case(jen.Lit(d)).Block(
			jen.Return(jen.Index().Id("Migration").Values(ms...)),
		))
	}
	cases = append(cases, jen.Default().Block(jen.Return(jen.Nil())))
	lineComments(f, "Migrations lists the migrations of dialect (\""+strings.Join(sqlDialects, "\", \"")+"\") in the order to\napply them; nil for an unknown dialect. Each call returns fresh slices.")
	f.Func().Id("Migrations").Params(jen.Id("dialect").String()).Index().Id("Migration").Block(
		jen.Switch(jen.Id("dialect")).Block(cases...),
	)
	return renderGo("sql/schema/embed.go", f)
}

// genWire writes generated/wire/sql.go: channels, the schema version and per-dialect rules.
func (s *SQLSpec) genWire() (File, error) {
	f := jen.NewFilePathName(wirePkg, "wire")
	f.Comment("SQLSchemaVersion is the schema version the generated SQL statements need.")
	f.Const().Id("SQLSchemaVersion").Op("=").Lit(s.latest().SchemaVersion)
	f.Comment("SQLReleaseChannel is the PostgreSQL NOTIFY channel a release publishes the lease name on.")
	f.Const().Id("SQLReleaseChannel").Op("=").Lit(s.ReleaseChannel)
	lineComments(f, "SQLGroupChannel is the PostgreSQL NOTIFY channel a join or leave publishes the group name on\n(besides the group's own channel, SQLGroupOwnChannel): kept for clients of earlier 5.x\nreleases, which LISTEN there.")
	f.Const().Id("SQLGroupChannel").Op("=").Lit(s.GroupChannel)
	// A lease's and a group's own channels: a prefix constant, and the channel of one name,
	// the prefix and the lowercase hex MD5 of the name (as the statements' md5() computes it).
	for _, c := range []struct{ prefixConst, prefixDoc, prefix, fn, param, doc string }{
		{"SQLLeaseChannelPrefix", "SQLLeaseChannelPrefix starts the PostgreSQL NOTIFY channel of one lease's releases (SQLLeaseChannel).",
			s.LeaseChannelPrefix, "SQLLeaseChannel", "name",
			"SQLLeaseChannel is the PostgreSQL NOTIFY channel a release of lease name publishes the name on:\nSQLLeaseChannelPrefix and the lowercase hex MD5 of the name's UTF-8 bytes, as the statements'\nmd5(name) computes it (a plain identifier, at most 63 bytes whatever the name)."},
		{"SQLGroupChannelPrefix", "SQLGroupChannelPrefix starts the PostgreSQL NOTIFY channel of one group's membership changes (SQLGroupOwnChannel).",
			s.GroupChannelPrefix, "SQLGroupOwnChannel", "group",
			"SQLGroupOwnChannel is the PostgreSQL NOTIFY channel a join or leave of group publishes the\ngroup name on: SQLGroupChannelPrefix and the lowercase hex MD5 of the name's UTF-8 bytes, as\nthe statements' md5(group_name) computes it (a plain identifier, at most 63 bytes whatever\nthe name)."},
	} {
		f.Comment(c.prefixDoc)
		f.Const().Id(c.prefixConst).Op("=").Lit(c.prefix)
		lineComments(f, c.doc)
		f.Func().Id(c.fn).Params(jen.Id(c.param).String()).String().Block(
			jen.Id("sum").Op(":=").Qual("crypto/md5", "Sum").Call(jen.Index().Byte().Parens(jen.Id(c.param))),
			jen.Return(jen.Id(c.prefixConst).Op("+").Qual("encoding/hex", "EncodeToString").Call(jen.Id("sum").Index(jen.Empty(), jen.Empty()))),
		)
	}
	lineComments(f, "The lock Migrate holds while it applies migrations (each dialect's MigrateLock takes it):\nthe PostgreSQL advisory lock key, the MySQL/MariaDB GET_LOCK name and how long GET_LOCK\nwaits for it.")
	f.Const().Defs(
		jen.Id("SQLMigrateLockKey").Int64().Op("=").Lit(int(s.MigrateLock.Key)),
		jen.Id("SQLMigrateLockName").Op("=").Lit(s.MigrateLock.Name),
		jen.Id("SQLMigrateLockTimeoutS").Int64().Op("=").Lit(int(s.MigrateLock.TimeoutS)),
	)
	f.Comment("SQLCommit ends an operation's transaction; SQLRollback abandons it (every dialect).")
	f.Const().Defs(
		jen.Id("SQLCommit").Op("=").Lit(s.Commit),
		jen.Id("SQLRollback").Op("=").Lit(s.Rollback),
	)

	var names []jen.Code
	for _, d := range sqlDialects {
		names = append(names, jen.Id("SQL"+sqlDialectGo(d)).Op("=").Lit(d))
	}
	f.Comment("The SQL dialect names, as sql/schema and sql/queries name their directories.")
	f.Const().Defs(names...)

	f.Comment("SQLDialect says how to drive one SQL dialect.")
	f.Type().Id("SQLDialect").Struct(
		jen.Comment("Name is the dialect's name."),
		jen.Id("Name").String(),
		jen.Comment("Migration is the path of the dialect's migration within sql/schema (and schema.FS)."),
		jen.Id("Migration").String(),
		jen.Comment("SessionSetup are the statements to run on every new connection before any other."),
		jen.Id("SessionSetup").Index().String(),
		jen.Comment("Begin is the statement that opens a transaction of an operation."),
		jen.Id("Begin").String(),
		jen.Comment("ChangeCounter reads a number that changes whenever another connection commits (empty: the dialect has none)."),
		jen.Id("ChangeCounter").String(),
		jen.Comment("DatabaseFile lists the attached databases, the main one first, as (seq, name, file) rows (empty: not a file database)."),
		jen.Id("DatabaseFile").String(),
		jen.Comment("JournalMode reads the database's journal mode, JournalWAL puts it in WAL mode and answers the"),
		jen.Comment("mode it is in after, and ObjectCount counts the schema objects the database file holds (all"),
		jen.Comment("empty: the dialect has no journal modes)."),
		jen.Id("JournalMode").String(),
		jen.Id("JournalWAL").String(),
		jen.Id("ObjectCount").String(),
		jen.Comment("Listen are the statements that subscribe a connection to the hint channels it keeps while open (empty: the dialect has none)."),
		jen.Id("Listen").Index().String(),
		jen.Comment("listenLease and unlistenLease are the statements around a lease's channel that subscribe a"),
		jen.Comment("connection to it and unsubscribe it (ListenLease, UnlistenLease; empty: the dialect has none)."),
		jen.Id("listenLease").Index(jen.Lit(2)).String(),
		jen.Id("unlistenLease").Index(jen.Lit(2)).String(),
		jen.Comment("listenGroup and unlistenGroup are the statements around a group's own channel that"),
		jen.Comment("subscribe a connection to it and unsubscribe it (ListenGroup, UnlistenGroup; empty: the"),
		jen.Comment("dialect has none)."),
		jen.Id("listenGroup").Index(jen.Lit(2)).String(),
		jen.Id("unlistenGroup").Index(jen.Lit(2)).String(),
		jen.Comment("MigrateLock takes the lock that serialises Migrate on its connection, and MigrateUnlock"),
		jen.Comment("releases it (both empty: the dialect needs none). On MySQL/MariaDB MigrateLock returns 1"),
		jen.Comment("when it got the lock."),
		jen.Id("MigrateLock").String(),
		jen.Id("MigrateUnlock").String(),
		jen.Comment("WakeLock takes the named lock of a lease (parameters: the lease name, a timeout in seconds) and returns 1 when taken, 0 on timeout (empty: the dialect has no named locks)."),
		jen.Id("WakeLock").String(),
		jen.Comment("WakeUnlock releases the named lock of a lease (parameter: the lease name)."),
		jen.Id("WakeUnlock").String(),
		jen.Comment("WakeConnID returns the id of the connection it runs on and its client's address as the server"),
		jen.Comment("sees it, WakeConnHost (parameter: such an id) that address of a connection of the same user's"),
		jen.Comment("(no row: none), WakeKill (parameter: such an id) ends one and lets its named locks go, and"),
		jen.Comment("WakeLockConn (parameter: the lease name) returns the id of the connection that holds the"),
		jen.Comment("lease's named lock (NULL: none) (all empty: the waker does not end the connections it"),
		jen.Comment("abandons, nor the ones that keep a lease's named lock from its holder)."),
		jen.Id("WakeConnID").String(),
		jen.Id("WakeConnHost").String(),
		jen.Id("WakeKill").String(),
		jen.Id("WakeLockConn").String(),
		jen.Comment("WakeKillQuery (parameter: an id as WakeConnID returns) ends the statement a connection of the"),
		jen.Comment("same user's runs, leaving the connection open and usable (a named-lock wait ends without its"),
		jen.Comment("lock) (empty: the waker ends a wait it no longer needs by closing its connection)."),
		jen.Id("WakeKillQuery").String(),
		jen.Comment("ReadOnlyCheck reads whether the server takes writes: one row of one text column, empty when"),
		jen.Comment("it does, otherwise why it does not (a standby, a read-only setting). The backend runs it in the"),
		jen.Comment("client's outage probe, so that a server that answers reads but refuses writes is not taken"),
		jen.Comment("for reachable again (empty: the dialect has none)."),
		jen.Id("ReadOnlyCheck").String(),
		jen.Comment("ReadOnlyWriteCheck is a write that changes nothing, run when ReadOnlyCheck reports the server"),
		jen.Comment("read-only: when the server takes it, the user's writes pass the read-only setting (MariaDB's"),
		jen.Comment("READ_ONLY ADMIN; MySQL's SUPER or CONNECTION_ADMIN without super_read_only) and the server is"),
		jen.Comment("writable for this client; when it refuses it, the server is read-only (empty: the dialect has"),
		jen.Comment("none, and ReadOnlyCheck's answer stands)."),
		jen.Id("ReadOnlyWriteCheck").String(),
		jen.Comment("IdleTxTimeout sets how long the server keeps the connection idle inside a transaction before"),
		jen.Comment("it ends the connection (and so the transaction and its locks): one statement with one"),
		jen.Comment("parameter, the bound in milliseconds, so that a client stopped inside one (SIGSTOP, a VM"),
		jen.Comment("frozen, a link that lost the replies) does not hold its row locks for the server's own"),
		jen.Comment("timeouts. MySQL/MariaDB's sets the connection's session variable: the backend runs it once"),
		jen.Comment("on each connection it uses for a transaction. PostgreSQL's lasts until the end of the"),
		jen.Comment("transaction (set_config's is_local): the backend sends it with each transaction's BEGIN, in"),
		jen.Comment("the same round trip (empty: the dialect has none)."),
		jen.Id("IdleTxTimeout").String(),
		jen.Comment("wakeFreeLeases is the statement that reads the free leases among some names, around its"),
		jen.Comment("list of name parameters (WakeFreeLeases; empty: the dialect has none)."),
		jen.Id("wakeFreeLeases").Index(jen.Lit(2)).String(),
		jen.Comment("Operations maps each SPI operation to the statements it runs."),
		jen.Id("Operations").Map(jen.String()).Id("SQLOperation"),
	)
	f.Comment("SQLOperation is how one SPI operation runs on one dialect.")
	f.Type().Id("SQLOperation").Struct(
		jen.Comment("Transaction: the statements run in one transaction opened with the dialect's Begin."),
		jen.Id("Transaction").Bool(),
		jen.Comment("Batch: the statements are sent at once, pipelined in one round trip; the decisions read"),
		jen.Comment("their values afterwards, in step order."),
		jen.Id("Batch").Bool(),
		jen.Comment("Pipeline: the transaction is pipelined: a step marked Pipeline is sent in the previous"),
		jen.Comment("step's round trip, the dialect's Begin in the first step's, and COMMIT in the last"),
		jen.Comment("step's when no decision can follow it (every statement through Queries.Batch). A step"),
		jen.Comment("that ends the operation before the last statement of its round trip rolls it back."),
		jen.Id("Pipeline").Bool(),
		jen.Comment("Queries are the sqlc query names (the methods of generated/sqlc/<dialect>), in order."),
		jen.Id("Queries").Index().String(),
		jen.Comment("Steps are the statements with what decides after each, in order (one per query)."),
		jen.Id("Steps").Index().Id("SQLStep"),
		jen.Comment("First names an operation run on its own before the steps (empty: none): its outcome is"),
		jen.Comment("the reply unless it is one of FirstContinue, in which case the steps run afresh."),
		jen.Id("First").String(),
		jen.Comment("FirstContinue lists the outcomes of First after which the steps run."),
		jen.Id("FirstContinue").Index().String(),
	)
	f.Comment("SQLStep is one statement of an operation and what decides after it. The backend runs the")
	f.Comment("steps in order: a step whose When is not the current outcome, or whose If parameter is not")
	f.Comment("given, is skipped; a one statement that returns no row ends the operation with NoRows (an")
	f.Comment("error when empty); a Decide decision answers the outcome, and an outcome in Reply ends it.")
	f.Type().Id("SQLStep").Struct(
		jen.Comment("Query is the sqlc query name."),
		jen.Id("Query").String(),
		jen.Comment("NoRows is the outcome when the statement returns no row (empty: no row is an error)."),
		jen.Id("NoRows").String(),
		jen.Comment("Decide names the decision run after the statement (empty: none)."),
		jen.Id("Decide").String(),
		jen.Comment("Reply lists the outcomes of Decide that end the operation."),
		jen.Id("Reply").Index().String(),
		jen.Comment("When: the step runs only after this outcome (empty: always)."),
		jen.Id("When").String(),
		jen.Comment("If: the step runs only when this parameter (a spec parameter name) is given."),
		jen.Id("If").String(),
		jen.Comment("Repeat: the step runs again while Decide answers this outcome, Attempts times in all."),
		jen.Id("Repeat").String(),
		jen.Comment("Attempts bounds the runs of a repeated step."),
		jen.Id("Attempts").Int(),
		jen.Comment("Pipeline: the statement is sent in the previous step's round trip, before that one's"),
		jen.Comment("result is read (only in a Pipeline operation)."),
		jen.Id("Pipeline").Bool(),
	)

	var cases []jen.Code
	for _, d := range sqlDialects {
		ds := s.Dialects[d]
		var setup []jen.Code
		for _, st := range ds.SessionSetup {
			setup = append(setup, jen.Lit(st))
		}
		var listen []jen.Code
		for i, st := range ds.Listen {
			x, _ := s.expand(fmt.Sprintf("dialects.%s.listen[%d]", d, i), st, d) // validated
			listen = append(listen, jen.Lit(x))
		}
		// lease and group: the (un)listen texts around a lease's and a group's own channel.
		var lease, group [2][2]string
		for _, o := range []struct {
			out   *[2][2]string
			texts [2]string
			ph    string
		}{{&lease, [2]string{ds.ListenLease, ds.UnlistenLease}, leaseChannelIdent}, {&group, [2]string{ds.ListenGroup, ds.UnlistenGroup}, groupOwnChannelIdent}} {
			for i, st := range o.texts {
				if st != "" {
					o.out[i], _ = s.expandOwn("dialects."+d, st, d, o.ph) // validated
				}
			}
		}
		var free [2]string
		if ds.WakeFreeLeases != "" {
			free, _ = s.expandOwn("dialects."+d+".wake_free_leases", ds.WakeFreeLeases, d, wakeNames) // validated
		}
		lock, _ := s.expand("dialects."+d+".migrate_lock", ds.MigrateLock, d)       // validated
		unlock, _ := s.expand("dialects."+d+".migrate_unlock", ds.MigrateUnlock, d) // validated
		var ops []jen.Code
		for _, op := range s.Operations {
			var qs, steps []jen.Code
			for _, e := range s.stepEntries(op, d) {
				qs = append(qs, jen.Lit(camel(e.Name)))
				step := jen.Dict{jen.Id("Query"): jen.Lit(camel(e.Name))}
				if e.NoRows != "" {
					step[jen.Id("NoRows")] = jen.Lit(e.NoRows)
				}
				if e.Decide != "" {
					step[jen.Id("Decide")] = jen.Lit(e.Decide)
					var reply []jen.Code
					for _, dc := range s.Decisions {
						if dc.Name == e.Decide {
							for _, o := range dc.Reply {
								reply = append(reply, jen.Lit(o))
							}
						}
					}
					step[jen.Id("Reply")] = jen.Index().String().Values(reply...)
				}
				if e.When != "" {
					step[jen.Id("When")] = jen.Lit(e.When)
				}
				if e.If != "" {
					step[jen.Id("If")] = jen.Lit(e.If)
				}
				if e.Repeat != nil {
					step[jen.Id("Repeat")] = jen.Lit(e.Repeat.Outcome)
					step[jen.Id("Attempts")] = jen.Lit(e.Repeat.Attempts)
				}
				if e.Pipeline && slices.Contains(op.Pipeline, d) {
					step[jen.Id("Pipeline")] = jen.True()
				}
				steps = append(steps, jen.Values(step))
			}
			dict := jen.Dict{
				jen.Id("Transaction"): jen.Lit(slices.Contains(op.Transaction, d)),
				jen.Id("Batch"):       jen.Lit(slices.Contains(op.Batch, d)),
				jen.Id("Queries"):     jen.Index().String().Values(qs...),
				jen.Id("Steps"):       jen.Index().Id("SQLStep").Values(steps...),
			}
			if slices.Contains(op.Pipeline, d) {
				dict[jen.Id("Pipeline")] = jen.True()
			}
			if fs := op.First; fs != nil && slices.Contains(fs.Dialects, d) {
				var cont []jen.Code
				for _, o := range fs.Continue {
					cont = append(cont, jen.Lit(o))
				}
				dict[jen.Id("First")] = jen.Lit(fs.Operation)
				dict[jen.Id("FirstContinue")] = jen.Index().String().Values(cont...)
			}
			ops = append(ops, jen.Lit(op.Name).Op(":").Values(dict))
		}
		cases = append(cases, jen.Case(jen.Id("SQL"+sqlDialectGo(d))).Block(
			jen.Return(jen.Id("SQLDialect").Values(jen.Dict{
				jen.Id("Name"):               jen.Id("SQL" + sqlDialectGo(d)),
				jen.Id("Migration"):          jen.Lit(d + "/" + s.migrationFile()),
				jen.Id("SessionSetup"):       jen.Index().String().Values(setup...),
				jen.Id("ChangeCounter"):      jen.Lit(ds.ChangeCounter),
				jen.Id("DatabaseFile"):       jen.Lit(ds.DatabaseFile),
				jen.Id("JournalMode"):        jen.Lit(ds.JournalMode),
				jen.Id("JournalWAL"):         jen.Lit(ds.JournalWAL),
				jen.Id("ObjectCount"):        jen.Lit(ds.ObjectCount),
				jen.Id("Listen"):             jen.Index().String().Values(listen...),
				jen.Id("listenLease"):        jen.Index(jen.Lit(2)).String().Values(jen.Lit(lease[0][0]), jen.Lit(lease[0][1])),
				jen.Id("unlistenLease"):      jen.Index(jen.Lit(2)).String().Values(jen.Lit(lease[1][0]), jen.Lit(lease[1][1])),
				jen.Id("listenGroup"):        jen.Index(jen.Lit(2)).String().Values(jen.Lit(group[0][0]), jen.Lit(group[0][1])),
				jen.Id("unlistenGroup"):      jen.Index(jen.Lit(2)).String().Values(jen.Lit(group[1][0]), jen.Lit(group[1][1])),
				jen.Id("MigrateLock"):        jen.Lit(lock),
				jen.Id("MigrateUnlock"):      jen.Lit(unlock),
				jen.Id("WakeLock"):           jen.Lit(ds.WakeLock),
				jen.Id("WakeUnlock"):         jen.Lit(ds.WakeUnlock),
				jen.Id("WakeConnID"):         jen.Lit(ds.WakeConnID),
				jen.Id("WakeConnHost"):       jen.Lit(ds.WakeConnHost),
				jen.Id("WakeKill"):           jen.Lit(ds.WakeKill),
				jen.Id("WakeLockConn"):       jen.Lit(ds.WakeLockConn),
				jen.Id("WakeKillQuery"):      jen.Lit(ds.WakeKillQuery),
				jen.Id("ReadOnlyCheck"):      jen.Lit(ds.ReadOnlyCheck),
				jen.Id("ReadOnlyWriteCheck"): jen.Lit(ds.ReadOnlyWriteCheck),
				jen.Id("IdleTxTimeout"):      jen.Lit(ds.IdleTxTimeout),
				jen.Id("wakeFreeLeases"):     jen.Index(jen.Lit(2)).String().Values(jen.Lit(free[0]), jen.Lit(free[1])),
				jen.Id("Begin"):              jen.Lit(ds.Begin),
				jen.Id("Operations"):         jen.Map(jen.String()).Id("SQLOperation").Values(ops...),
			}), jen.True()),
		))
	}
	cases = append(cases, jen.Default().Block(jen.Return(jen.Id("SQLDialect").Values(), jen.False())))
	var decs []jen.Code
	for _, dc := range s.Decisions {
		var outs []jen.Code
		for _, o := range dc.outcomes() {
			outs = append(outs, jen.Lit(o))
		}
		decs = append(decs, jen.Lit(dc.Name).Op(":").Index().String().Values(outs...))
	}
	lineComments(f, "SQLDecisions maps each decision an operation step may name to its outcomes (those that end\nthe operation first). The backend implements exactly these. Each call returns a fresh map.")
	f.Func().Id("SQLDecisions").Params().Map(jen.String()).Index().String().Block(
		jen.Return(jen.Map(jen.String()).Index().String().Values(decs...)),
	)
	lineComments(f, "SQLDialectByName describes dialect name, or reports false if there is no such dialect.\nEach call returns fresh slices and maps.")
	f.Func().Id("SQLDialectByName").Params(jen.Id("name").String()).Params(jen.Id("SQLDialect"), jen.Bool()).Block(
		jen.Switch(jen.Id("name")).Block(cases...),
	)
	for _, m := range []struct{ name, field, channel, doc string }{
		{"ListenLease", "listenLease", "SQLLeaseChannel", "ListenLease returns the statement that subscribes a connection to the release channel of\nlease name (SQLLeaseChannel); \"\" when the dialect has no channels."},
		{"UnlistenLease", "unlistenLease", "SQLLeaseChannel", "UnlistenLease returns the statement that unsubscribes a connection from the release channel\nof lease name (SQLLeaseChannel); \"\" when the dialect has no channels."},
		{"ListenGroup", "listenGroup", "SQLGroupOwnChannel", "ListenGroup returns the statement that subscribes a connection to the own channel of group\nname (SQLGroupOwnChannel); \"\" when the dialect has no channels."},
		{"UnlistenGroup", "unlistenGroup", "SQLGroupOwnChannel", "UnlistenGroup returns the statement that unsubscribes a connection from the own channel of\ngroup name (SQLGroupOwnChannel); \"\" when the dialect has no channels."},
	} {
		lineComments(f, m.doc)
		f.Func().Params(jen.Id("d").Id("SQLDialect")).Id(m.name).Params(jen.Id("name").String()).String().Block(
			jen.If(jen.Id("d").Dot(m.field).Index(jen.Lit(0)).Op("==").Lit("")).Block(jen.Return(jen.Lit(""))),
			jen.Return(jen.Id("d").Dot(m.field).Index(jen.Lit(0)).Op("+").Id(m.channel).Call(jen.Id("name")).Op("+").Id("d").Dot(m.field).Index(jen.Lit(1))),
		)
	}
	lineComments(f, "WakeFreeLeases returns the statement that reads which of n lease names (its n parameters,\nn > 0) are free: no holder, or one whose session expired. Each row is a free lease's name,\nits last token and the first live waiter of its queue (empty: none). \"\" when the dialect has\nnone.")
	f.Func().Params(jen.Id("d").Id("SQLDialect")).Id("WakeFreeLeases").Params(jen.Id("n").Int()).String().Block(
		jen.If(jen.Id("d").Dot("wakeFreeLeases").Index(jen.Lit(0)).Op("==").Lit("").Op("||").Id("n").Op("<=").Lit(0)).Block(jen.Return(jen.Lit(""))),
		jen.Return(jen.Id("d").Dot("wakeFreeLeases").Index(jen.Lit(0)).Op("+").Qual("strings", "Repeat").Call(jen.Lit("?, "), jen.Id("n").Op("-").Lit(1)).Op("+").Lit("?").Op("+").Id("d").Dot("wakeFreeLeases").Index(jen.Lit(1))),
	)
	return renderGo("generated/wire/sql.go", f)
}

// SQLCVetURIEnv is the environment variable sql/sqlc-vet.yaml reads dialect d's database URI
// from.
func SQLCVetURIEnv(d string) string { return "SIMBA_SQLC_VET_" + strings.ToUpper(d) }

func sqlDialectGo(d string) string {
	switch d {
	case "postgres":
		return "Postgres"
	case "mysql":
		return "MySQL"
	case "sqlite":
		return "SQLite"
	}
	return camel(d)
}

// lineComments adds text to f as "//" line comments (jennifer renders a multi-line Comment as a
// block comment).
func lineComments(f *jen.File, text string) {
	for _, line := range strings.Split(text, "\n") {
		f.Comment(line)
	}
}

// SQLCOutputs lists the files sqlc writes from the spec in specDir, relative to the repository
// root: generated/sqlc/<dialect>/{db.go,models.go,<statement>.sql.go}.
func SQLCOutputs(specDir string) ([]string, error) {
	s, err := LoadSQL(specDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range sqlDialects {
		dir := "generated/sqlc/" + d + "/"
		out = append(out, dir+"db.go", dir+"models.go")
		for _, op := range s.Operations {
			if slices.Contains(op.Batch, d) || slices.Contains(op.Pipeline, d) {
				// Written after sqlc by simbagen -sqlq.
				out = append(out, dir+sqlcQueueFile)
				break
			}
		}
		for _, st := range s.Statements {
			if slices.Contains(st.Dialects, d) {
				out = append(out, dir+st.Name+".sql.go")
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// PruneSQLC removes every file under root/generated/sqlc that sqlc would not write from the
// spec (the output of a statement since removed, a dialect since dropped), so that a regenerated
// tree has no stale leftovers. It returns the removed paths, relative to root.
func PruneSQLC(root string) ([]string, error) {
	want, err := SQLCOutputs(filepath.Join(root, "spec"))
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, p := range want {
		keep[p] = true
	}
	var removed []string
	base := filepath.Join(root, "generated", "sqlc")
	err = filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
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
		rel = filepath.ToSlash(rel)
		if keep[rel] {
			return nil
		}
		if err := os.Remove(p); err != nil {
			return err
		}
		removed = append(removed, rel)
		return nil
	})
	return removed, err
}

// validateFirst checks an operation's first try: a known operation other than op with no first
// try of its own, valid dialects, and continue outcomes that some decision or no_rows of that
// operation can answer.
func (s *SQLSpec) validateFirst(field string, op SQLOperationSpec) error {
	fs := op.First
	if fs == nil {
		return nil
	}
	f := sqlFile
	if err := sqlCheckDialects(field+".dialects", fs.Dialects); err != nil {
		return err
	}
	if len(fs.Dialects) == 0 {
		return specErr(f, field+".dialects", "is empty")
	}
	if len(fs.Continue) == 0 {
		return specErr(f, field+".continue", "is empty")
	}
	var first *SQLOperationSpec
	for i := range s.Operations {
		if s.Operations[i].Name == fs.Operation {
			first = &s.Operations[i]
		}
	}
	if first == nil || fs.Operation == op.Name {
		return specErr(f, field+".operation", "unknown operation %q (or the operation itself)", fs.Operation)
	}
	if first.First != nil {
		return specErr(f, field+".operation", "operation %s has a first try of its own", fs.Operation)
	}
	outcomes := map[string]bool{}
	for _, e := range first.Statements {
		if e.NoRows != "" {
			outcomes[e.NoRows] = true
		}
		for _, dc := range s.Decisions {
			if dc.Name == e.Decide {
				for _, o := range append(append([]string(nil), dc.Reply...), dc.Continue...) {
					outcomes[o] = true
				}
			}
		}
	}
	for _, o := range fs.Continue {
		if !outcomes[o] {
			return specErr(f, field+".continue", "operation %s answers no outcome %q", fs.Operation, o)
		}
	}
	return nil
}
