package gen

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/fixture/golden")

const (
	fixtureSpec   = "testdata/fixture/spec"
	fixtureGolden = "testdata/fixture/golden"
)

// TestGolden generates the fixture spec and compares every artifact with its golden copy.
// Run `go test -update` to rewrite the golden files after an intended change.
func TestGolden(t *testing.T) {
	files, err := Generate(fixtureSpec)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.RemoveAll(fixtureGolden); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			p := filepath.Join(fixtureGolden, filepath.FromSlash(f.Path)) + ".golden"
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]bool{}
	for _, f := range files {
		want[f.Path] = true
		golden, err := os.ReadFile(filepath.Join(fixtureGolden, filepath.FromSlash(f.Path)) + ".golden")
		if err != nil {
			t.Errorf("%s: no golden file (run go test -update): %v", f.Path, err)
			continue
		}
		if !bytes.Equal(golden, f.Data) {
			t.Errorf("%s differs from its golden file (run go test -update if intended)", f.Path)
		}
	}
	_ = filepath.WalkDir(fixtureGolden, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(fixtureGolden, p)
		if !want[strings.TrimSuffix(filepath.ToSlash(rel), ".golden")] {
			t.Errorf("stale golden file %s", rel)
		}
		return nil
	})
}

// TestDeterministic: two runs give identical output.
func TestDeterministic(t *testing.T) {
	a, err := Generate(fixtureSpec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(fixtureSpec)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Path != b[i].Path || !bytes.Equal(a[i].Data, b[i].Data) {
			t.Fatalf("run 2 differs at %s", a[i].Path)
		}
	}
}

// TestRepositoryUpToDate: the repository's own artifacts match its spec (what make verify checks).
func TestRepositoryUpToDate(t *testing.T) {
	files, err := Generate("../spec")
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := Diff("..", files)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("out of date (run go generate ./...):\n%s", strings.Join(diffs, "\n"))
	}
}

// mutate copies the fixture spec to a temporary directory with one replacement applied to one
// file, failing the test if old does not occur exactly once.
func mutate(t *testing.T, file, old, new string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(fixtureSpec, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fixtureSpec, p)
		dst := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if filepath.ToSlash(rel) == file {
			if n := strings.Count(string(data), old); n != 1 {
				t.Fatalf("%s: %q occurs %d times, want once", file, old, n)
			}
			data = []byte(strings.Replace(string(data), old, new, 1))
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// brokenSpecCases: each mutation of the fixture must fail with a one-line error naming the
// place. Parts add their own cases here.
var brokenSpecCases = []struct {
	name, file, old, new string
	wantErr              string // substring of the error
}{
	{"name too long", "names.yaml", "max_length: 128", "max_length: 300", "spec/names.yaml: name.max_length: must be in"},
	{"bad alphabet range", "names.yaml", `["A-Z", "a-z"`, `["A-Z", "z-a"`, "spec/names.yaml: name.alphabet[1]"},
	{"slash allowed", "names.yaml", `"_"`, `"/"`, `spec/names.yaml: name.alphabet: '/' cannot be allowed`},
	{"unknown field", "names.yaml", "case_sensitive: true", "case_sensitive: true\n  colour: red", "spec/names.yaml: "},
	{"owner without bound", "names.yaml", "max_bytes: 255", "max_bytes: 0", "spec/names.yaml: owner.max_bytes: must be in [1, 65535]"},
	{"owner refusing no control characters", "names.yaml", "refused_categories: [Cc, Cf, Zl, Zp]", "refused_categories: [Cf]", "spec/names.yaml: owner.refused_categories: must contain Cc"},
	{"owner refusing an unknown category", "names.yaml", "refused_categories: [Cc, Cf, Zl, Zp]", "refused_categories: [Cc, Cn]", `spec/names.yaml: owner.refused_categories[1]: "Cn" is not one of`},
	{"owner refusing a category twice", "names.yaml", "refused_categories: [Cc, Cf, Zl, Zp]", "refused_categories: [Cc, Cc]", `spec/names.yaml: owner.refused_categories[1]: "Cc" is listed twice`},
	{"odd client session id", "names.yaml", "client_hex_digits: 32", "client_hex_digits: 31", "spec/names.yaml: session_id.client_hex_digits: must be an even number"},
	{"probe group not a name", "names.yaml", "probe_group: simba.probe", "probe_group: simba/probe", `spec/names.yaml: probe_group: "simba/probe": byte 5`},
	{"probe group missing", "names.yaml", "probe_group: simba.probe", "", "spec/names.yaml: probe_group: must be 1 to 128 bytes"},
	{"zookeeper session id not 64 bits", "names.yaml", "zookeeper_hex_digits: 16", "zookeeper_hex_digits: 8", "spec/names.yaml: session_id.zookeeper_hex_digits: must be 16"},
	{"wrong vector", "assign.yaml", "weight: 961102844131960919", "weight: 961102844131960918", "spec/assign.yaml: weight_vectors[0]: weight(0, \"a\") is 961102844131960919"},
	{"wrong owner", "assign.yaml", `owner: "b"`, `owner: "a"`, "spec/assign.yaml: owner_vectors[2]"},
	{"bad type", "assign.yaml", "final_shift: 31", "final_shift: thirty-one", "spec/assign.yaml: "},
	{"bad error prefix", "redis.yaml", "\nstatuses:", "\nerror_prefix: \"Simba\"\nstatuses:", "spec/redis.yaml: error_prefix: \"Simba\" must be lowercase letters and a colon"},
	{"redis error without prefix", "redis.yaml", "\nstatuses:", "\nerrors: [{name: boom}]\nstatuses:", "spec/redis.yaml: errors.boom: named errors need error_prefix"},
	{"redis duplicate error", "redis.yaml", "\nstatuses:", "\nerror_prefix: \"simba:\"\nerrors: [{name: boom}, {name: boom}]\nstatuses:", "spec/redis.yaml: errors.boom: duplicate error"},
	{"redis bad error name", "redis.yaml", "\nstatuses:", "\nerror_prefix: \"simba:\"\nerrors: [{name: Boom}]\nstatuses:", "spec/redis.yaml: errors[0].name"},
	// Redis (spec/redis.yaml, spec/lua/).
	{"redis token not int64", "redis.yaml", "{name: token, type: int64, doc: the grant's token}", "{name: token, type: string, doc: the grant's token}", "spec/redis.yaml: scripts.grab.reply.token.type: token is a token or millisecond value and must be int64"},
	{"redis ms arg not int64", "redis.yaml", "{name: ttl_ms, type: int64}", "{name: ttl_ms, type: string}", "spec/redis.yaml: scripts.renew.args.ttl_ms.type: ttl_ms is a token or millisecond value"},
	{"redis record token not int64", "redis.yaml", "- {name: token, type: int64}\n", "- {name: token, type: string}\n", "spec/redis.yaml: records.held.fields.token.type: token is a token or millisecond value"},
	{"redis bad reply type", "redis.yaml", "{name: held, type: \"[]held\"}", "{name: held, type: \"[]helt\"}", "spec/redis.yaml: scripts.renew.reply.held.type: unknown type \"[]helt\""},
	{"redis duplicate script", "redis.yaml", "name: renew", "name: grab", "spec/redis.yaml: scripts.grab: duplicate script"},
	{"redis key without hash tag", "redis.yaml", `pattern: "simba:lease:{<name>}"`, `pattern: "simba:lease:<name>"`, "spec/redis.yaml: keys.lease.pattern: \"simba:lease:<name>\" must hold exactly one hash tag"},
	{"redis unknown key type", "redis.yaml", "type: string\n    doc: a session key", "type: list\n    doc: a session key", "spec/redis.yaml: keys.session.type: unknown Redis type \"list\""},
	{"redis unknown key in script", "redis.yaml", "{name: lease, key: lease}", "{name: lease, key: lock}", "spec/redis.yaml: scripts.grab.keys.lease.key: unknown key \"lock\""},
	{"redis list arg without length", "redis.yaml", `type: "[]string", len_of: leases}`, `type: "[]string"}`, "spec/redis.yaml: scripts.renew.args.names.len_of: missing"},
	{"redis cluster script across slots", "redis.yaml", "cluster: false", "cluster: true", "spec/redis.yaml: scripts.renew.cluster: a cluster script with a list key has no other key"},
	{"redis caller key with a pattern", "redis.yaml", "{name: lease, key: lease}", "{name: lease, key: lease, caller: true}", "spec/redis.yaml: scripts.grab.keys.lease: a caller key names no key pattern"},
	{"redis missing cluster flag", "redis.yaml", "    cluster: true\n", "", "spec/redis.yaml: scripts.grab.cluster: missing"},
	{"lua unknown placeholder", "lua/grab.lua", "'${lease.token}'", "'${lease.tokn}'", "spec/lua/grab.lua: line 6: unknown placeholder ${lease.tokn}"},
	{"lua builds a key", "lua/grab.lua", "redis.call('HSET', KEYS[1],", "redis.call('HSET', 'simba:lease:{' .. ARGV[1] .. '}',", "spec/lua/grab.lua: line 7: builds the key lease inside Lua"},
	{"lua KEYS out of range", "lua/grab.lua", "redis.call('HINCRBY', KEYS[1]", "redis.call('HINCRBY', KEYS[2]", "spec/lua/grab.lua: line 6: KEYS[2] is out of range"},
	{"lua ARGV out of range", "lua/grab.lua", "holder ~= ARGV[1]", "holder ~= ARGV[3]", "spec/lua/grab.lua: line 3: ARGV[3] is out of range"},
	{"lua source missing", "redis.yaml", "source: lua/grab.lua", "source: lua/grabs.lua", "spec/lua/grabs.lua: cannot read"},
	// ZooKeeper (spec/zk.yaml).
	{"zk unknown mode", "zk.yaml", "mode: ephemeral", "mode: sequential", "spec/zk.yaml: nodes.lease.mode: unknown mode \"sequential\""},
	{"zk ephemeral parent", "zk.yaml", "path: /simba/leases\n    mode: persistent", "path: /simba/leases\n    mode: ephemeral", "spec/zk.yaml: nodes.lease.path: its parent leases is ephemeral"},
	{"zk undeclared parent", "zk.yaml", "path: /simba/leases/<name>", "path: /simba/locks/<name>", "spec/zk.yaml: nodes.lease.path: its parent \"/simba/locks\" is not a declared node"},
	{"zk world may delete", "zk.yaml", "token: czxid\n    doc: a lease\n    acl: {creator: [all], world: [read]}", "token: czxid\n    doc: a lease\n    acl: {creator: [all], world: [read, delete]}", "spec/zk.yaml: nodes.lease.acl.world: grants delete"},
	{"zk token on a persistent node", "zk.yaml", "path: /simba/leases/<name>\n    mode: ephemeral", "path: /simba/leases/<name>\n    mode: persistent", "spec/zk.yaml: nodes.lease.token: only an ephemeral node"},
	{"zk bad parameter", "zk.yaml", "path: /simba/leases/<name>", "path: /simba/leases/lease-<name>", "spec/zk.yaml: nodes.lease.path: segment \"lease-<name>\" mixes a parameter with text"},
	{"zk wrong perm bits", "zk.yaml", "delete: 8", "delete: 16", "spec/zk.yaml: perms: must be ZooKeeper's permission bits"},
	{"zk missing acl intent", "zk.yaml", "acl_intent: only", "acl_intent_x: only", "spec/zk.yaml: "},
	// SQL (spec/sql.yaml).
	{"sql unknown dialect", "sql.yaml", "  sqlite:\n    engine: sqlite", "  oracle:\n    engine: sqlite", "spec/sql.yaml: dialects.oracle: unknown dialect"},
	{"sql missing variant", "sql.yaml", "    sqlite: \"CAST(unixepoch('subsec') * 1000 AS INTEGER)\"\n", "", "spec/sql.yaml: variants.now: missing variant for sqlite"},
	{"sql operation missing a dialect", "sql.yaml", "dialects: [mysql, sqlite]", "dialects: [mysql]", "spec/sql.yaml: operations.release: missing variant for sqlite"},
	{"sql duplicate operation", "sql.yaml", "  - name: database_now\n    statements:", "  - name: release\n    statements:", "spec/sql.yaml: operations[1].name: duplicate operation release"},
	{"sql first unknown operation", "sql.yaml", "    transaction: [sqlite]\n", "    transaction: [sqlite]\n    first: {operation: acquire, dialects: [postgres], continue: [held_by]}\n", `spec/sql.yaml: operations.release.first.operation: unknown operation "acquire"`},
	{"sql first itself", "sql.yaml", "    transaction: [sqlite]\n", "    transaction: [sqlite]\n    first: {operation: release, dialects: [postgres], continue: [held_by]}\n", `spec/sql.yaml: operations.release.first.operation: unknown operation "release" (or the operation itself)`},
	{"sql first unknown outcome", "sql.yaml", "    transaction: [sqlite]\n", "    transaction: [sqlite]\n    first: {operation: database_now, dialects: [postgres], continue: [held_by]}\n", `spec/sql.yaml: operations.release.first.continue: operation database_now answers no outcome "held_by"`},
	{"sql first no dialects", "sql.yaml", "    transaction: [sqlite]\n", "    transaction: [sqlite]\n    first: {operation: database_now, continue: [held_by]}\n", `spec/sql.yaml: operations.release.first.dialects: is empty`},
	{"sql duplicate statement", "sql.yaml", "  - name: release_no_notify", "  - name: release", "spec/sql.yaml: statements[1].name: duplicate statement release"},
	{"sql bad column type", "sql.yaml", `postgres: "BIGINT"`, `postgres: "BIGNUM"`, `spec/sql.yaml: types.int64.postgres: bad column type "BIGNUM"`},
	{"sql undeclared column type", "sql.yaml", "{name: token, type: int64}", "{name: token, type: int32}", `spec/sql.yaml: tables.simba_lease.columns[2].type: bad column type "int32"`},
	{"sql token not int64", "sql.yaml", "{name: token, type: int64}", "{name: token, type: name}", "spec/sql.yaml: tables.simba_lease.columns[2].type: token holds a token, version or millisecond value and must be a 64-bit integer"},
	{"sql unknown placeholder", "sql.yaml", "SELECT {{now}} AS now_ms", "SELECT {{nowish}} AS now_ms", "spec/sql.yaml: statements.database_now.sql: unknown placeholder {{nowish}}"},
	{"sql bad returns", "sql.yaml", "returns: one", "returns: row", "spec/sql.yaml: statements.database_now.returns: must be one, many or exec"},
	// Operation steps: decisions, no_rows, when, batch.
	{"sql unknown decision", "sql.yaml", "statements: [database_now]", "statements: [{name: database_now, decide: nope}]", `spec/sql.yaml: operations.database_now.statements[0].decide: unknown decision "nope"`},
	{"sql no_rows on exec", "sql.yaml", "statements: [release, release_no_notify]", "statements: [{name: release, no_rows: gone}, release_no_notify]", "spec/sql.yaml: operations.release.statements[0].no_rows: statement release returns exec"},
	{"sql when without decision", "sql.yaml", "statements: [database_now]", "statements: [{name: database_now, when: take}]", "spec/sql.yaml: operations.database_now.statements[database_now].when: on postgres no earlier step's decision continues with \"take\""},
	{"sql batch on database/sql", "sql.yaml", "  - name: database_now\n    statements:", "  - name: database_now\n    batch: [mysql]\n    statements:", "spec/sql.yaml: operations.database_now.batch: mysql: only a pgx/v5 dialect pipelines a batch"},
	{"sql pipeline without transaction", "sql.yaml", "  - name: database_now\n    statements:", "  - name: database_now\n    pipeline: [postgres]\n    statements:", "spec/sql.yaml: operations.database_now.pipeline: postgres: only a transaction is pipelined; add it to transaction"},
	{"sql pipeline on database/sql", "sql.yaml", "  - name: release\n    transaction: [sqlite]", "  - name: release\n    transaction: [sqlite]\n    pipeline: [sqlite]", "spec/sql.yaml: operations.release.pipeline: sqlite: only a pgx/v5 dialect pipelines"},
	{"sql pipelined step without pipeline", "sql.yaml", "statements: [release, release_no_notify]", "statements: [release, {name: release_no_notify, pipeline: true}]", "spec/sql.yaml: operations.release.statements[release_no_notify].pipeline: the operation pipelines on no dialect"},
	{"sql pipelined first step", "sql.yaml", "  - name: database_now\n    statements: [database_now]", "  - name: database_now\n    transaction: [postgres]\n    pipeline: [postgres]\n    statements: [{name: database_now, pipeline: true}]", "spec/sql.yaml: operations.database_now.statements[database_now].pipeline: on postgres it is the first step: there is no previous one to join"},
	{"sql pipelined when on its own pipeline's decision", "sql.yaml", "  - name: database_now\n    statements: [database_now]", "  - name: database_now\n    transaction: [postgres]\n    pipeline: [postgres]\n    statements: [{name: database_now, decide: clock}, {name: database_now, when: later, pipeline: true}]\ndecisions: [{name: clock, reply: [now], continue: [later]}]", "spec/sql.yaml: operations.database_now.statements[database_now].pipeline: on postgres it runs only when \"later\", which a decision of its own pipeline answers after the round trip"},
	{"sql pipelined after a repeat", "sql.yaml", "  - name: database_now\n    statements: [database_now]", "  - name: database_now\n    transaction: [postgres]\n    pipeline: [postgres]\n    statements: [{name: database_now, decide: clock, repeat: {outcome: later, attempts: 2}}, {name: database_now, pipeline: true}]\ndecisions: [{name: clock, reply: [now], continue: [later]}]", "spec/sql.yaml: operations.database_now.statements[database_now].pipeline: on postgres the previous step (database_now) repeats: a repeated step ends its pipeline"},
	{"sql unused decision", "sql.yaml", "\noperations:", "\ndecisions: [{name: spare, reply: [done]}]\noperations:", "spec/sql.yaml: decisions.spare: is used by no step"},
	{"sql repeat of an unknown outcome", "sql.yaml", "statements: [database_now]", "statements: [{name: database_now, decide: clock, repeat: {outcome: later, attempts: 2}}]\ndecisions: [{name: clock, reply: [now]}]", `spec/sql.yaml: operations.database_now.statements[0].repeat.outcome: "later" is not an outcome of decision clock`},
	{"sql if without parameter", "sql.yaml", "statements: [database_now]", "statements: [{name: database_now, if: group_names}]", `spec/sql.yaml: operations.database_now.statements[0].if: "group_names" is not a parameter of statement database_now`},
	{"sql unknown statement", "sql.yaml", "statements: [database_now]", "statements: [database_later]", `spec/sql.yaml: operations.database_now.statements[0]: unknown statement "database_later"`},
	{"sql unknown field", "sql.yaml", "inline_indexes: true", "inline_indexs: true", "spec/sql.yaml: "},
	{"sql index on unknown column", "sql.yaml", "columns: [session_id]", "columns: [holder]", `spec/sql.yaml: tables.simba_lease.indexes[0].columns[0]: unknown column "holder"`},
	{"sql catalog query unrestricted", "sql.yaml", "foreign_keys: SELECT '', '', '', '', '', '' FROM DUAL WHERE 'x' IN ({{schema_tables}})", "foreign_keys: SELECT 1 FROM DUAL", "spec/sql.yaml: schema_check.queries.mysql.foreign_keys: must restrict itself to {{schema_tables}}"},
	{"sql table probe without its table", "sql.yaml", "foreign_keys: SELECT '', '', '', '', '', '' FROM DUAL WHERE 'x' IN ({{schema_tables}})", "foreign_keys: SELECT '', '', '', '', '', '' FROM DUAL WHERE 'x' IN ({{schema_tables}})\n      table_probe: SELECT 1 FROM DUAL", "spec/sql.yaml: schema_check.queries.mysql.table_probe: must be one statement without ';' that names {{table}} once"},
	{"sql access query unrestricted", "sql.yaml", "foreign_keys: SELECT '', '', '', '', '', '' FROM DUAL WHERE 'x' IN ({{schema_tables}})", "foreign_keys: SELECT '', '', '', '', '', '' FROM DUAL WHERE 'x' IN ({{schema_tables}})\n      access: SELECT '', '' FROM DUAL", "spec/sql.yaml: schema_check.queries.mysql.access: must restrict itself to {{schema_tables}}"},
	{"sql write check without read-only check", "sql.yaml", "    engine: mysql\n", "    engine: mysql\n    read_only_write_check: UPDATE t SET a = a WHERE 1 = 0\n", "spec/sql.yaml: dialects.mysql.read_only_write_check: needs read_only_check"},
	{"etcd key outside the prefix", "etcd.yaml", "pattern: <prefix>/sessions/<sid>", "pattern: /sessions/<sid>", "spec/etcd.yaml: keys.session.pattern: \"/sessions/<sid>\" must start with <prefix>/"},
	{"etcd unknown compare target", "etcd.yaml", "{key: lease, target: lease, op: \"=\", value: lease}", "{key: lease, target: value, op: \"=\", value: lease}", "spec/etcd.yaml: txns.release.if[1].target: unknown target"},
	{"etcd put without lease", "etcd.yaml", "    value: empty\n    lease: session", "    value: empty\n    lease: none", "spec/etcd.yaml: keys.held.lease: must be session"},
	{"etcd unguarded txn", "etcd.yaml", "    if:\n      - {key: session, target: create_revision, op: \">\", value: \"0\"}\n    then:\n      - {op: delete, key: member}", "    then:\n      - {op: delete, key: member}", "spec/etcd.yaml: txns.leave: needs an if and a then"},
	{"etcd compare of a key and a prefix", "etcd.yaml", "{prefix: queue, target: create_revision, op: \"=\", value: \"0\"}\n    then:\n      - {op: put, key: lease, value: owner}\n      - {op: put, key: held, value: empty}\n    else:\n      - {op: get, key: session}", "{key: lease, prefix: queue, target: create_revision, op: \"=\", value: \"0\"}\n    then:\n      - {op: put, key: lease, value: owner}\n      - {op: put, key: held, value: empty}\n    else:\n      - {op: get, key: session}", "spec/etcd.yaml: txns.acquire.if[2]: compares a key or a prefix, not both"},
	{"etcd compare of an unknown prefix", "etcd.yaml", "{prefix: queue, target: create_revision, op: \"=\", value: \"0\"}\n    then:\n      - {op: put, key: lease, value: owner}\n      - {op: put, key: held, value: empty}\n    else:\n      - {op: txn", "{prefix: line, target: create_revision, op: \"=\", value: \"0\"}\n    then:\n      - {op: put, key: lease, value: owner}\n      - {op: put, key: held, value: empty}\n    else:\n      - {op: txn", "spec/etcd.yaml: txns.acquire_queued.if[2].prefix: unknown prefix \"line\""},
	{"etcd first on a get", "etcd.yaml", "      - {op: get, key: lease}\n      - {op: range, prefix: queue, first: create_revision}\n  - name: acquire_queued", "      - {op: get, key: lease, first: create_revision}\n      - {op: range, prefix: queue, first: create_revision}\n  - name: acquire_queued", "spec/etcd.yaml: txns.acquire.else[1].first: only a range reads its first key"},
	{"etcd lease compared with a revision", "etcd.yaml", "{key: waiter, target: lease, op: \"=\", value: lease}", "{key: waiter, target: lease, op: \"=\", value: rev}", "spec/etcd.yaml: txns.withdraw.if[0].value: a lease compares with lease"},
	{"etcd at least zero", "etcd.yaml", "{prefix: queue, target: create_revision, op: \">=\", value: rev}", "{prefix: queue, target: create_revision, op: \">=\", value: \"0\"}", "spec/etcd.yaml: txns.take.if[3].op: >= 0 always holds"},
	{"etcd nested unknown txn", "etcd.yaml", "      - {op: txn, txn: enqueue}", "      - {op: txn, txn: dequeue}", "spec/etcd.yaml: txns.acquire_queued.else[0]: txn needs a declared transaction (and no key or prefix), got \"dequeue\""},
	{"etcd nested twice", "etcd.yaml", "      - {op: txn, txn: enqueue}", "      - {op: txn, txn: acquire_queued}", "spec/etcd.yaml: txns.acquire_queued.else[0].txn: acquire_queued nests a transaction itself: one level of nesting only"},
	{"etcd txn on a get", "etcd.yaml", "      - {op: get, key: lease}\n      - {op: range, prefix: queue, first: create_revision}\n  - name: acquire_queued", "      - {op: get, key: lease, txn: enqueue}\n      - {op: range, prefix: queue, first: create_revision}\n  - name: acquire_queued", "spec/etcd.yaml: txns.acquire.else[1].txn: only a txn op names a transaction"},
	{"etcd prev_kv on a get", "etcd.yaml", "      - {op: get, key: lease}\n      - {op: range, prefix: queue, first: create_revision}\n  - name: take", "      - {op: get, key: lease, prev_kv: true}\n      - {op: range, prefix: queue, first: create_revision}\n  - name: take", "spec/etcd.yaml: txns.enqueue.then[1].prev_kv: only a put returns the previous version"},
	{"etcd two token keys", "etcd.yaml", "    value: empty\n    lease: session", "    value: empty\n    lease: session\n    token: create_revision", "spec/etcd.yaml: keys: exactly one key carries the token, found 2"},
	{"sql catalog query missing", "sql.yaml", "      primary_keys: SELECT '', '' FROM DUAL WHERE 'x' IN ({{schema_tables}})\n", "", "spec/sql.yaml: schema_check.queries.mysql.primary_keys: is empty"},
	{"sql no catalog type for a base type", "sql.yaml", "    BIGINT: {postgres: [int8], mysql: [bigint], sqlite: [integer, bigint]}\n", "", "spec/sql.yaml: schema_check.compatible_types: no entry for BIGINT"},
	{"sql unused variant", "sql.yaml", "variants:\n", "variants:\n  share_lock: {postgres: \"FOR SHARE\"}\n", "spec/sql.yaml: variants.share_lock.postgres: is used by no postgres statement"},
	{"sql variant missing for a dialect that uses it", "sql.yaml", "    postgres: \" ON CONFLICT DO NOTHING\"\n", "", "spec/sql.yaml: variants.on_conflict_ignore: missing variant for postgres (used by version_insert)"},
	{"sql migrate lock without unlock", "sql.yaml", "    migrate_unlock: \"DO RELEASE_LOCK({{migrate_lock_name}})\"\n", "", "spec/sql.yaml: dialects.mysql.migrate_unlock: migrate_lock and migrate_unlock go together"},
	{"sql wake free leases without its names", "sql.yaml", "WHERE name IN ({{names}}) AND", "WHERE name IN (?) AND", "spec/sql.yaml: dialects.mysql.wake_free_leases: must be one statement without ';' that names {{names}} once"},
	{"sql wake free leases without wake lock", "sql.yaml", "    wake_lock: SELECT GET_LOCK(CONCAT('simba:', ?), ?)\n    wake_unlock: SELECT RELEASE_LOCK(CONCAT('simba:', ?))\n", "", "spec/sql.yaml: dialects.mysql.wake_free_leases: wake_free_leases goes with wake_lock"},
	{"sql bad migrate lock name", "sql.yaml", "name: simba_migrate", "name: \"simba migrate\"", "spec/sql.yaml: migrate_lock.name: \"simba migrate\" is not a plain lock name"},
	{"sql migrate lock without key", "sql.yaml", "key: 495690015329, ", "", "spec/sql.yaml: migrate_lock.key: is missing or 0"},
	{"sql catalog type missing a dialect", "sql.yaml", "VARCHAR: {postgres: [varchar, text], mysql: [varchar], sqlite: [text, varchar]}", "VARCHAR: {postgres: [varchar, text], mysql: [varchar]}", "spec/sql.yaml: schema_check.compatible_types.VARCHAR: missing catalog types for sqlite"},
	// Fencing (spec/fence.yaml).
	{"fence version not after the lease schema", "fence.yaml", "schema_version: 2", "schema_version: 1", "spec/fence.yaml: schema_version: must follow spec/sql.yaml's schema_version 1"},
	{"fence unknown argument", "fence.yaml", "WHERE resource = sqlc.arg(resource)\n      sqlite", "WHERE resource = sqlc.arg(name)\n      sqlite", `spec/fence.yaml: statements.highest.sql.mysql: unknown argument "name"`},
	{"fence missing statement", "fence.yaml", "  - name: table_exists", "  - name: highest_again", `spec/fence.yaml: statements[2].name: unknown statement "highest_again"`},
	{"fence table taken", "fence.yaml", "  - name: simba_fence", "  - name: simba_lease", "spec/fence.yaml: tables[0].name: duplicate table simba_lease"},
	{"fence token not int64", "fence.yaml", "{name: token, type: int64}", "{name: token, type: name}", "spec/fence.yaml: tables.simba_fence.columns[1].type: token holds a token"},
	{"fence highest returns nothing", "fence.yaml", "returns: {postgres: one, mysql: one, sqlite: one}\n    sql:\n      postgres: SELECT token", "returns: {postgres: exec, mysql: one, sqlite: one}\n    sql:\n      postgres: SELECT token", "spec/fence.yaml: statements.highest.returns.postgres: highest returns one row"},
}

func TestBrokenSpec(t *testing.T) {
	for _, c := range brokenSpecCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Generate(mutate(t, c.file, c.old, c.new))
			if err == nil {
				t.Fatal("Generate succeeded on a broken spec")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			if !strings.Contains(msg, c.wantErr) {
				t.Errorf("error %q does not contain %q", msg, c.wantErr)
			}
		})
	}
}

// dependentCases: changing one detail of the spec changes exactly the listed artifacts. Parts
// add their own cases here.
var dependentCases = []struct {
	name, file, old, new string
	changed              []string
}{
	{"separator", "names.yaml", `separator: "."`, `separator: ":"`, []string{"generated/wire/names.go"}},
	{"owner bound", "names.yaml", "max_bytes: 255", "max_bytes: 200", []string{"generated/wire/names.go"}},
	{"owner categories", "names.yaml", "refused_categories: [Cc, Cf, Zl, Zp]", "refused_categories: [Cc]", []string{"generated/wire/names.go"}},
	{"vector", "assign.yaml", `{partition: 1000, members: ["x", "a"], owner: "x"}`, `{partition: 1000, members: ["a", "x"], owner: "x"}`, []string{"generated/wire/assign_vectors_test.go"}},
	// Redis: a script's source changes only that script's artifacts; a key pattern only the
	// key builders; a status code used in Lua changes the scripts that use it and its constant.
	{"lua source", "lua/grab.lua", "-- grab: KEYS lease; ARGV session_id", "-- grab: takes a lease", []string{"generated/luascripts/grab_script.go", "lua/grab.lua"}},
	{"redis key pattern", "redis.yaml", `pattern: "simba:session:{<sid>}"`, `pattern: "simba:sess:{<sid>}"`, []string{"generated/wire/redis.go"}},
	{"redis status value", "redis.yaml", "{name: held_by, value: 2", "{name: held_by, value: 5", []string{"generated/luascripts/grab_script.go", "generated/luascripts/luascripts.go", "lua/grab.lua"}},
	{"redis field doc", "redis.yaml", "{name: token, doc: the fencing token}", "{name: token, doc: the lease's fencing token}", []string{"generated/wire/redis.go"}},
	{"redis reply doc", "redis.yaml", "doc: the grant's token", "doc: the token of the grant", []string{"generated/luascripts/grab_script.go"}},
	// ZooKeeper: the layout document and the path builders.
	{"zk node doc", "zk.yaml", "path: /simba/leases\n    mode: persistent\n    doc: the leases' parent", "path: /simba/leases\n    mode: persistent\n    doc: the parent of the leases", []string{"generated/wire/zk.go", "zk/layout.yaml"}},
	// etcd: a key pattern changes the key builders only; a compare only the transactions.
	{"etcd key pattern", "etcd.yaml", "pattern: <prefix>/held/<sid>/<name>", "pattern: <prefix>/index/<sid>/<name>", []string{"generated/wire/etcd.go"}},
	{"etcd range compare", "etcd.yaml", "{prefix: queue, target: create_revision, op: \">=\", value: rev}", "{prefix: queue, target: mod_revision, op: \">=\", value: rev}", []string{"generated/etcdtxn/etcdtxn.go"}},
	{"etcd nested txn", "etcd.yaml", "{key: lease, target: lease, op: \"!=\", value: lease}", "{key: lease, target: lease, op: \"=\", value: \"0\"}", []string{"generated/etcdtxn/etcdtxn.go"}},
	{"etcd compare", "etcd.yaml", "{key: lease, target: create_revision, op: \"=\", value: token}", "{key: lease, target: mod_revision, op: \"=\", value: token}", []string{"generated/etcdtxn/etcdtxn.go"}},
	// SQL: a dialect's variant changes only that dialect's statements using it; a column type
	// only that dialect's migration (and its embedded copy); a channel the statements that notify
	// and the wire constant; a session setup statement only the wire constants.
	{"sql mysql now", "sql.yaml", `mysql: "CAST(UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000 AS SIGNED)"`, `mysql: "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"`, []string{"sql/queries/mysql/database_now.sql"}},
	{"sql postgres type", "sql.yaml", `postgres: 'VARCHAR(128) COLLATE "C"'`, `postgres: 'VARCHAR(200) COLLATE "C"'`, []string{"generated/wire/sqlschema.go", "sql/schema/embed.go", "sql/schema/postgres/0001_init.sql", "sql/schema/postgres/0002_fence.sql"}},
	// The fence (spec/fence.yaml): a statement changes only the generated statements; the
	// table's doc only its migration.
	{"fence statement", "fence.yaml", "WHERE name = 'simba_fence'", "WHERE type = 'table' AND name = 'simba_fence'", []string{"generated/wire/sqlfence.go"}},
	{"fence table doc", "fence.yaml", "doc: The highest token per resource.", "doc: The highest token of each resource.", []string{"sql/schema/mysql/0002_fence.sql", "sql/schema/postgres/0002_fence.sql", "sql/schema/sqlite/0002_fence.sql"}},
	{"sql release channel", "sql.yaml", "release_channel: simba_released", "release_channel: simba_freed", []string{"generated/wire/sql.go", "sql/queries/postgres/release.sql"}},
	{"sql lease channel prefix", "sql.yaml", "lease_channel_prefix: simba_rel_", "lease_channel_prefix: simba_lease_", []string{"generated/wire/sql.go", "sql/queries/postgres/release.sql"}},
	{"sql group channel prefix", "sql.yaml", "group_channel_prefix: simba_grp_", "group_channel_prefix: simba_member_", []string{"generated/wire/sql.go"}},
	{"sql session setup", "sql.yaml", "session_setup: [PRAGMA busy_timeout = 10000]", "session_setup: [PRAGMA busy_timeout = 5000]", []string{"generated/wire/sql.go"}},
	{"sql migrate lock name", "sql.yaml", "name: simba_migrate", "name: simba_migrator", []string{"generated/wire/sql.go"}},
	{"sql wake lock", "sql.yaml", "wake_lock: SELECT GET_LOCK(CONCAT('simba:', ?), ?)", "wake_lock: SELECT GET_LOCK(CONCAT('simba.', ?), ?)", []string{"generated/wire/sql.go"}},
	{"sql wake free leases", "sql.yaml", "WHERE name IN ({{names}}) AND session_id IS NULL", "WHERE name IN ({{names}}) AND token > 0 AND session_id IS NULL", []string{"generated/wire/sql.go"}},
	{"sql change counter", "sql.yaml", "change_counter: PRAGMA data_version", "change_counter: PRAGMA schema_version", []string{"generated/wire/sql.go"}},
	// The schema check: a catalog query or a compatible type changes only the check.
	{"sql catalog query", "sql.yaml", "table_definitions: SELECT name, sql FROM", "table_definitions: SELECT name AS table_name, sql FROM", []string{"generated/wire/sqlschema.go"}},
	{"sql compatible type", "sql.yaml", "mysql: [varchar]", "mysql: [varchar, char]", []string{"generated/wire/sqlschema.go"}},
}

func TestOneDetailChangesOnlyItsDependents(t *testing.T) {
	base, err := Generate(fixtureSpec)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range dependentCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Generate(mutate(t, c.file, c.old, c.new))
			if err != nil {
				t.Fatal(err)
			}
			before := map[string][]byte{}
			for _, f := range base {
				before[f.Path] = f.Data
			}
			var changed []string
			for _, f := range got {
				if old, ok := before[f.Path]; !ok || !bytes.Equal(old, f.Data) {
					changed = append(changed, f.Path)
				}
				delete(before, f.Path)
			}
			for p := range before {
				changed = append(changed, p)
			}
			slices.Sort(changed)
			if !slices.Equal(changed, c.changed) {
				t.Errorf("changed %q, want %q", changed, c.changed)
			}
		})
	}
}
