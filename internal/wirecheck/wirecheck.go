// Package wirecheck finds wire details written by hand in Go source: SQL statements, Redis
// commands sent by name, Redis key prefixes and ZooKeeper path literals. Everything on the wire
// comes from spec/ through gen/ (DESIGN.md §6), so backend/ may use only the generated
// artifacts; make verify runs this package's tests over backend/.
//
// The check reads string literals with go/ast, so comments never count. A literal that is part
// of a message (an argument of an error, log or format call: fmt.Errorf, errors.New,
// fmt.Sprintf, a logger's Warn/Info/Error/Debug, ...) is prose, not a wire operation, and is
// skipped. Files ending in _test.go and generated files (a "Code generated ... DO NOT EDIT."
// header) are skipped too.
package wirecheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Finding is one hand-written wire detail.
type Finding struct {
	// Pos is file:line:column, the file relative to the checked root (slash-separated).
	Pos string
	// Kind says which rule matched: "sql", "redis-command", "redis-key" or "zk-path".
	Kind string
	// Literal is the string literal's value.
	Literal string
}

// String formats the finding as "file:line:col: kind literal \"value\"".
func (f Finding) String() string { return fmt.Sprintf("%s: %s literal %q", f.Pos, f.Kind, f.Literal) }

// Exception allows one literal in one file, with the reason it is not a wire detail.
type Exception struct {
	File    string // relative to the checked root, slash-separated
	Kind    string
	Literal string
	Reason  string
}

// BackendExceptions are the literals backend/ may keep. Each says why it is not a wire detail.
var BackendExceptions = []Exception{
	{File: "redis/backend.go", Kind: "redis-command", Literal: "wait",
		Reason: "WAIT is the DSN's replication-durability option (wait=N): it reads and writes no key, so it is no part of the layout nodes must agree on; sent from one place (Backend.wait) for grants, Cluster pipelined rounds and the probe"},
	{File: "redis/hints.go", Kind: "redis-command", Literal: "subscribe",
		Reason: "the Kind go-redis gives a subscription's confirmation (a *redis.Subscription it received, not a command sent); the channel names come from generated/wire"},
	{File: "redis/backend.go", Kind: "sql", Literal: "SELECT is not allowed in cluster mode",
		Reason: "the start of an error a Redis Cluster node replies to the connection's SELECT of a DSN's database (matched with go-redis's HasErrorPrefix to say what to change in the DSN): read, never sent, and no SQL"},
	{File: "redis/tls.go", Kind: "redis-command", Literal: "PING\r\n",
		Reason: "a diagnostic probe on a raw socket (is a tls=true DSN pointing at a plain-text server?), before any Simba operation; it touches no key"},
}

var (
	// A literal that starts like an SQL statement (upper-case keywords, as the spec writes them).
	sqlStartRE = regexp.MustCompile(`^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|LISTEN|UNLISTEN|NOTIFY|BEGIN|COMMIT|ROLLBACK|START TRANSACTION|PRAGMA|SET|CREATE|DROP|ALTER|DO|LOCK|UNLOCK|SAVEPOINT|RELEASE SAVEPOINT)(\s|$|\()`)
	// SQL that gives a statement away wherever it appears in a literal.
	sqlAnyRE = regexp.MustCompile(`\b(FOR SHARE|FOR UPDATE|LOCK IN SHARE MODE|ON CONFLICT|ON DUPLICATE KEY|RETURNING|GET_LOCK|RELEASE_LOCK|pg_advisory_\w+|pg_notify|INSERT INTO|DELETE FROM)\b`)
	// Redis key prefixes and hash-tagged key patterns.
	redisKeyRE = regexp.MustCompile(`simba:[A-Za-z{]|:\{[^}]*\}`)
	// ZooKeeper paths of Simba's layout.
	zkPathRE = regexp.MustCompile(`(^|[^A-Za-z0-9_])/(simba|leases|groups)(/|$|\b)`)
)

// redisCommands are command names and their flags; a literal that is exactly one of them (any
// case) is a command sent by name.
var redisCommands = map[string]bool{}

func init() {
	for _, c := range strings.Fields(`APPEND BITCOUNT BLPOP BRPOP CLIENT CLUSTER CONFIG COPY DECR DECRBY DEL
		DUMP EVAL EVALSHA EVAL_RO EVALSHA_RO EXISTS EXPIRE EXPIREAT FCALL FUNCTION GET GETDEL GETEX
		GETSET HDEL HEXISTS HGET HGETALL HINCRBY HKEYS HLEN HMGET HMSET HSET HSETNX HVALS INCR INCRBY
		INFO KEYS LPUSH LRANGE MGET MSET MULTI EXEC WATCH UNWATCH PERSIST PEXPIRE PEXPIREAT PING PSETEX
		PSUBSCRIBE PTTL PUBLISH PUNSUBSCRIBE RENAME RPUSH SADD SCAN SCARD SCRIPT SET SETEX SETNX SISMEMBER
		SMEMBERS SPUBLISH SREM SSUBSCRIBE SUBSCRIBE TIME TTL TYPE UNLINK UNSUBSCRIBE WAIT WAITAOF ZADD
		ZCARD ZCOUNT ZINCRBY ZRANGE ZRANGEBYSCORE ZRANK ZREM ZREMRANGEBYSCORE ZREVRANGE ZSCORE
		XX NX GT LT PX EX PXAT EXAT KEEPTTL WITHSCORES`) {
		redisCommands[c] = true
	}
}

// messageFuncs are the callees whose string arguments are prose (errors, logs, formatting).
var messageFuncs = map[string]bool{
	"Errorf": true, "New": true, "Sprintf": true, "Sprint": true, "Sprintln": true, "Fprintf": true,
	"Printf": true, "Println": true, "Warn": true, "Info": true, "Error": true, "Debug": true,
	"WarnContext": true, "InfoContext": true, "ErrorContext": true, "DebugContext": true,
	"Log": true, "Logf": true, "Fatal": true, "Fatalf": true, "Panic": true, "Panicf": true,
	"warnOnce": true, "Unavailable": true, "Permanent": true,
}

var generatedRE = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// Check walks the Go files under root (tests and generated files excepted) and returns the
// wire literals it finds that no exception allows, sorted by position.
func Check(root string, exceptions []Exception) ([]Finding, error) {
	fset := token.NewFileSet()
	var out []Finding
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if isGenerated(f) {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		for _, fd := range findings(fset, f) {
			if allowed(exceptions, rel, fd) {
				continue
			}
			pos := fset.Position(fd.at)
			out = append(out, Finding{Pos: fmt.Sprintf("%s:%d:%d", rel, pos.Line, pos.Column), Kind: fd.kind, Literal: fd.lit})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Pos < out[j].Pos })
	return out, err
}

func isGenerated(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if generatedRE.MatchString(c.Text) {
				return true
			}
		}
	}
	return false
}

func allowed(exceptions []Exception, file string, fd finding) bool {
	for _, e := range exceptions {
		if e.File == file && e.Kind == fd.kind && e.Literal == fd.lit {
			return true
		}
	}
	return false
}

type finding struct {
	at   token.Pos
	kind string
	lit  string
}

// findings lists the wire literals of f outside message calls.
func findings(fset *token.FileSet, f *ast.File) []finding {
	var out []finding
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		if _, isImport := stack[len(stack)-2].(*ast.ImportSpec); isImport {
			return true
		}
		if inMessage(stack) {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		if k := classify(s); k != "" {
			out = append(out, finding{lit.Pos(), k, s})
		}
		return true
	})
	return out
}

// inMessage reports whether the innermost call around the literal (through string
// concatenation only) is a message call.
func inMessage(stack []ast.Node) bool {
	for i := len(stack) - 2; i >= 0; i-- {
		switch n := stack[i].(type) {
		case *ast.BinaryExpr, *ast.ParenExpr:
			continue
		case *ast.CallExpr:
			var name string
			switch fn := n.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			}
			return messageFuncs[name]
		default:
			return false
		}
	}
	return false
}

// classify names the rule a literal breaks, or "".
func classify(s string) string {
	switch {
	case sqlStartRE.MatchString(s) || sqlAnyRE.MatchString(s):
		return "sql"
	case redisCommands[strings.ToUpper(strings.TrimSpace(s))]:
		return "redis-command"
	case redisKeyRE.MatchString(s):
		return "redis-key"
	case zkPathRE.MatchString(s):
		return "zk-path"
	}
	return ""
}
