package sql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// who names the user (role) and server of the backend's pool for an error of refused access:
// ` (user "u" at host:port, database "d")`, or "" when the pool does not tell.
func (b *Backend) who() string {
	switch d := b.d.(type) {
	case *pgDialect:
		if d.pool != nil {
			cc := d.pool.Config().ConnConfig
			return fmt.Sprintf(" (user %q at %s:%d, database %q)", cc.User, cc.Host, cc.Port, cc.Database)
		}
	case *stdDialect:
		if d.server != "" {
			return fmt.Sprintf(" (user %q at %s)", d.user, d.server)
		}
	}
	return ""
}

// roleIdent is the PostgreSQL role of the pool as an SQL identifier, for a GRANT the error
// suggests ("the role" when the pool does not tell).
func (b *Backend) roleIdent() string {
	if d, ok := b.d.(*pgDialect); ok && d.pool != nil {
		return pgx.Identifier{d.pool.Config().ConnConfig.User}.Sanitize()
	}
	return "the role"
}

// hiddenTables is asked, once the schema check found tables missing (missing: their names; nil
// for all of them, when the version table itself could not be read, or a migration found no
// schema to create them in), whether a missing privilege hides them rather than a missing
// migration: a PostgreSQL role without USAGE on the schema its search_path names (the
// search_path skips such a schema, so every table in it reads as missing, 42P01, and a
// migration finds no schema to create in, 3F000), a MySQL/MariaDB user with table-level grants
// that leave a table out (information_schema hides a table on which the user holds no
// privilege). It returns a permanent error of op matching spi.ErrAccessDenied, not
// spi.ErrSchemaMissing, that names the privilege and the objects, with cause as its cause; or
// nil when the tables are really missing (or the catalog cannot tell).
func (b *Backend) hiddenTables(ctx context.Context, op string, want wire.SQLSchemaCheck, missing []string, cause error) error {
	if want.AccessQuery != "" {
		rows, err := b.d.catalog(ctx, want.AccessQuery, 2)
		if err != nil || len(rows) == 0 {
			return nil // the missing tables stand
		}
		var privs []string              // in the query's order, each once
		tables := map[string][]string{} // privilege → tables
		for _, r := range rows {
			if missing != nil && !slices.Contains(missing, r[0]) {
				continue
			}
			if tables[r[1]] == nil {
				privs = append(privs, r[1])
			}
			tables[r[1]] = append(tables[r[1]], r[0])
		}
		if len(privs) == 0 {
			return nil
		}
		what := make([]string, len(privs))
		for i, p := range privs {
			what[i] = fmt.Sprintf("%s (which holds %s)", p, strings.Join(tables[p], ", "))
		}
		grants := make([]string, len(privs))
		for i, p := range privs {
			grants[i] = "GRANT " + p + " TO " + b.roleIdent()
		}
		return spi.AccessDenied("sql "+b.name+" "+op, "privilege refused"+b.who()+
			": the role lacks "+strings.Join(what, "; ")+
			": the search_path skips a schema the role may not use, so Simba's tables there read as missing although they exist: "+
			strings.Join(grants, "; ")+" (and SELECT, INSERT, UPDATE, DELETE ON the simba_* tables there), or fix the search_path", cause)
	}
	var denied []string
	var first error
	for _, t := range want.Tables {
		if t.ProbeQuery == "" || missing != nil && !slices.Contains(missing, t.Name) {
			continue
		}
		_, err := b.d.catalog(ctx, t.ProbeQuery, 1)
		if err == nil {
			continue
		}
		switch c := b.fail("schema check", err); {
		case spi.Classify(c) == spi.Retryable:
			return nil // the missing tables stand; the next check asks again
		case errors.Is(c, spi.ErrAccessDenied):
			denied = append(denied, t.Name)
			if first == nil {
				first = err
			}
		}
	}
	if len(denied) == 0 {
		return nil
	}
	hidden := "table " + denied[0] + ", so the catalog hides it from the user (whether it exists only a user who may see it can tell)"
	on := denied[0]
	if len(denied) > 1 {
		hidden = "tables " + strings.Join(denied, ", ") + ", so the catalog hides them from the user (whether they exist only a user who may see them can tell)"
		on = "each of " + strings.Join(denied, ", ")
	}
	return spi.AccessDenied("sql "+b.name+" "+op, "privilege refused"+b.who()+
		": the user holds no privilege on "+hidden+": GRANT SELECT, INSERT, UPDATE, DELETE ON "+on+
		" (or on the database's simba_* tables) TO the user", first)
}
