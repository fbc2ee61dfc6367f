package sqlcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/sql/schema"
)

// repoRoot is the repository root relative to this package's directory.
const repoRoot = "../.."

// testCtx returns a context that ends with the test (or after a minute).
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// unique returns a fresh lowercase-hex prefix so that parallel tests (and other packages'
// tests sharing the database) never touch each other's names, groups or sessions.
func unique(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// dialect returns the generated description of dialect d.
func dialect(t *testing.T, d string) wire.SQLDialect {
	t.Helper()
	sd, ok := wire.SQLDialectByName(d)
	if !ok {
		t.Fatalf("no dialect %q in generated/wire", d)
	}
	return sd
}

// migrationStatements returns the statements of every migration of dialect d, checking that
// the embedded files exist and that the last migration is the version the library needs.
func migrationStatements(t *testing.T, d string) []string {
	t.Helper()
	ms := schema.Migrations(d)
	if len(ms) == 0 {
		t.Fatalf("no migrations for %s", d)
	}
	var out []string
	for _, m := range ms {
		data, err := schema.FS.ReadFile(m.Path)
		if err != nil {
			t.Fatalf("embedded migration %s: %v", m.Path, err)
		}
		for _, st := range m.Statements {
			if !strings.Contains(string(data), st+";") {
				t.Fatalf("%s does not contain its listed statement %q", m.Path, st)
			}
		}
		out = append(out, m.Statements...)
	}
	if schema.LatestVersion != wire.SQLSchemaVersion {
		t.Fatalf("schema.LatestVersion %d != wire.SQLSchemaVersion %d", schema.LatestVersion, wire.SQLSchemaVersion)
	}
	// The lease schema starts with the first migration (the one the wire names, the path
	// errors point to) and ends with the one at LatestVersion; the fence migration is among
	// them (the lease backends do not need it). Versions increase.
	if i := slices.IndexFunc(ms, func(m schema.Migration) bool { return m.Version == schema.LatestVersion }); i < 0 {
		t.Fatalf("no migration of %s at version %d", d, schema.LatestVersion)
	}
	if dialect(t, d).Migration != ms[0].Path {
		t.Fatalf("wire migration %q != first schema path %q", dialect(t, d).Migration, ms[0].Path)
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].Version <= ms[i-1].Version {
			t.Fatalf("%s: migration %s does not follow %s", d, ms[i].Path, ms[i-1].Path)
		}
	}
	fence, _ := wire.SQLFenceByName(d)
	if schema.FenceVersion != wire.SQLFenceVersion || !slices.ContainsFunc(ms, func(m schema.Migration) bool {
		return m.Version == schema.FenceVersion && m.Path == fence.Migration
	}) {
		t.Fatalf("no fence migration %s at version %d among the migrations of %s", fence.Migration, schema.FenceVersion, d)
	}
	return out
}

// applyTwice runs the migration of dialect d twice through exec.
func applyTwice(t *testing.T, d string, exec func(string) error) {
	t.Helper()
	stmts := migrationStatements(t, d)
	for round := 1; round <= 2; round++ {
		for _, st := range stmts {
			if err := exec(st); err != nil {
				t.Fatalf("%s migration, round %d: %v\n%s", d, round, err, st)
			}
		}
	}
}

// query is one sqlc query as the generated package sends it.
type query struct {
	Name string // sqlc name, e.g. "Acquire"
	SQL  string
}

var (
	queryNameRE = regexp.MustCompile(`^-- name: (\w+) :(one|many|exec)\b`)
	sliceRE     = regexp.MustCompile(`/\*SLICE:\w+\*/\?`)
)

// generatedQueries extracts every query constant of generated/sqlc/<d> and checks that each
// query file under sql/queries/<d> produced exactly one. sqlc.slice markers become a single
// placeholder, which is what the generated code sends for a one-element slice.
func generatedQueries(t *testing.T, d string) []query {
	t.Helper()
	dir := filepath.Join(repoRoot, "generated", "sqlc", d)
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []query
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					m := queryNameRE.FindStringSubmatch(s)
					if m == nil {
						continue
					}
					out = append(out, query{Name: m[1], SQL: sliceRE.ReplaceAllString(s, "?")})
				}
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(repoRoot, "sql", "queries", d, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 || len(out) != len(files) {
		t.Fatalf("%s: %d query files but %d generated queries", d, len(files), len(out))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// acquireReply is an Acquire reply in dialect-neutral form.
type acquireReply struct {
	Kind      string // "granted", "held", "expired"
	Token     int64
	Remaining int64
	Holder    string
	Owner     string
}

// keepAliveReply is a KeepAlive reply in dialect-neutral form.
type keepAliveReply struct {
	Expired   bool
	Remaining int64
	Held      map[string]int64
	Members   map[string][]string
}

// leaseRow is one lease as Inspect shows it (a lease whose holder expired is shown free).
type leaseRow struct {
	Holder, Owner string
	Token         int64
	Remaining     int64
}

// ops drives the production backend of one dialect (backendOps, over the public SPI of
// backend/sql) with session labels the test chooses.
type ops interface {
	open(ctx context.Context, id, owner string, ttlMs int64) error
	acquire(ctx context.Context, sid, name string) (acquireReply, error)
	release(ctx context.Context, sid, name string, token int64) error
	keepAlive(ctx context.Context, sid string, groups []string) (keepAliveReply, error)
	join(ctx context.Context, sid, group string) (live bool, err error)
	leave(ctx context.Context, sid, group string) (live bool, err error)
	members(ctx context.Context, group string) ([]string, error)
	closeSession(ctx context.Context, sid string) error
	housekeeping(ctx context.Context) error
	leases(ctx context.Context) (map[string]leaseRow, error)
	liveSessions(ctx context.Context) (map[string]int64, error)
	schemaVersion(ctx context.Context) (int64, error)
	now(ctx context.Context) (int64, error)
	// sessionRows counts the rows of simba_session with this id, live or not (test-only SQL).
	sessionRows(ctx context.Context, sid string) (int, error)
	// leaseRowHeldBy tells whether the lease row of name names session sid with token, live or
	// not (test-only SQL).
	leaseRowHeldBy(ctx context.Context, name, sid string, token int64) (bool, error)
	// sessionID is the session id the backend made for the label sid.
	sessionID(sid string) string
}

// lastVersion is the schema version of dialect d's last migration: a database with every
// migration applied is at it.
func lastVersion(d string) int64 {
	ms := schema.Migrations(d)
	return int64(ms[len(ms)-1].Version)
}
