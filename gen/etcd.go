package gen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// EtcdSpec is spec/etcd.yaml: the etcd key layout and the transaction of each SPI operation.
type EtcdSpec struct {
	Prefix   string       `yaml:"prefix"`
	Keys     []EtcdKey    `yaml:"keys"`
	Prefixes []EtcdPrefix `yaml:"prefixes"`
	Txns     []EtcdTxn    `yaml:"txns"`
}

// EtcdKey is one kind of key: a pattern of <param> segments under <prefix>.
type EtcdKey struct {
	Name    string `yaml:"name"`
	Pattern string `yaml:"pattern"`
	Value   string `yaml:"value"` // owner or empty
	Lease   string `yaml:"lease"` // session: attached to the session's etcd lease
	Token   string `yaml:"token"` // create_revision, on the key whose creation is a tenure
	Doc     string `yaml:"doc"`

	params []string
}

// EtcdPrefix is a key prefix the backend ranges over or watches; its pattern ends in "/".
type EtcdPrefix struct {
	Name    string `yaml:"name"`
	Pattern string `yaml:"pattern"`
	Doc     string `yaml:"doc"`

	params []string
}

// EtcdTxn is one transaction: compares, then the operations of each branch.
type EtcdTxn struct {
	Name string    `yaml:"name"`
	Doc  string    `yaml:"doc"`
	If   []EtcdCmp `yaml:"if"`
	Then []EtcdOp  `yaml:"then"`
	Else []EtcdOp  `yaml:"else"`
}

// EtcdCmp is one compare of a transaction's guard, on one key or on every key under a prefix.
// A compare over a prefix holds when it holds for every key under it; etcd compares an empty
// range as one zero KeyValue (create revision, version and lease 0), so "create_revision = 0"
// over a prefix holds exactly when no key is under it.
type EtcdCmp struct {
	Key    string `yaml:"key"`
	Prefix string `yaml:"prefix"`
	Target string `yaml:"target"` // create_revision, mod_revision, version, lease
	Op     string `yaml:"op"`     // =, !=, <, >, >= (etcd has no >=: "> value-1" is sent)
	Value  string `yaml:"value"`  // a non-negative integer, token, rev or lease
}

// EtcdOp is one operation of a transaction branch.
type EtcdOp struct {
	Op     string `yaml:"op"` // put, delete, get (a key), range (a prefix), txn (a nested transaction)
	Key    string `yaml:"key"`
	Prefix string `yaml:"prefix"`
	Value  string `yaml:"value"` // put: owner or empty
	// First, on a range, reads only the key that comes first by this target, ascending
	// (create_revision: the oldest key under the prefix).
	First string `yaml:"first"`
	// Txn, on a txn op, names another transaction of the spec, run nested (etcd >= 3.3): its
	// guard decides between its own branches, and its response is one TxnResponse.
	Txn string `yaml:"txn"`
	// PrevKV, on a put, returns the key's previous version in the put's response (a read: it
	// gets a response index).
	PrevKV bool `yaml:"prev_kv"`
}

const (
	etcdFile    = "etcd.yaml"
	etcdTxnPkg  = "github.com/simba-go/simba/generated/etcdtxn"
	clientv3Pkg = "go.etcd.io/etcd/client/v3"
)

// etcdParams are the parameters a key pattern or transaction may take, in the order generated
// functions take them, with their Go types.
var etcdParams = []struct{ name, typ string }{
	{"prefix", "string"}, {"sid", "string"}, {"name", "string"}, {"group", "string"},
	{"owner", "string"}, {"lease", "lease"}, {"token", "int64"}, {"rev", "int64"},
}

var etcdTargets = map[string]string{
	"create_revision": "CreateRevision", "mod_revision": "ModRevision", "version": "Version", "lease": "LeaseValue",
}

// LoadEtcd loads and validates spec/etcd.yaml.
func LoadEtcd(specDir string) (*EtcdSpec, error) {
	var s EtcdSpec
	if err := loadYAML(specDir, etcdFile, &s); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(s.Prefix, "/") || strings.HasSuffix(s.Prefix, "/") || strings.ContainsAny(s.Prefix, "<>") {
		return nil, specErr(etcdFile, "prefix", "%q must start with / and not end with / (no parameters)", s.Prefix)
	}
	keys := map[string]*EtcdKey{}
	shapes := map[string]string{}
	for i := range s.Keys {
		k := &s.Keys[i]
		field := fmt.Sprintf("keys[%d]", i)
		if err := checkIdent(etcdFile, field+".name", k.Name); err != nil {
			return nil, err
		}
		field = "keys." + k.Name
		if keys[k.Name] != nil {
			return nil, specErr(etcdFile, field, "duplicate key")
		}
		keys[k.Name] = k
		ps, shape, err := etcdPattern(field+".pattern", k.Pattern, false)
		if err != nil {
			return nil, err
		}
		k.params = ps
		if other, ok := shapes[shape]; ok {
			return nil, specErr(etcdFile, field+".pattern", "same shape as key %s", other)
		}
		shapes[shape] = k.Name
		if k.Value != "owner" && k.Value != "empty" {
			return nil, specErr(etcdFile, field+".value", "unknown value %q (want owner or empty)", k.Value)
		}
		if k.Lease != "session" {
			return nil, specErr(etcdFile, field+".lease", "must be session: every key a session writes dies with its etcd lease")
		}
		if k.Token != "" && k.Token != "create_revision" {
			return nil, specErr(etcdFile, field+".token", "unknown token source %q (want create_revision)", k.Token)
		}
		if strings.TrimSpace(k.Doc) == "" {
			return nil, specErr(etcdFile, field+".doc", "missing")
		}
	}
	tokens := 0
	for _, k := range s.Keys {
		if k.Token != "" {
			tokens++
		}
	}
	if tokens != 1 {
		return nil, specErr(etcdFile, "keys", "exactly one key carries the token, found %d", tokens)
	}
	prefixes := map[string]*EtcdPrefix{}
	for i := range s.Prefixes {
		p := &s.Prefixes[i]
		if err := checkIdent(etcdFile, fmt.Sprintf("prefixes[%d].name", i), p.Name); err != nil {
			return nil, err
		}
		field := "prefixes." + p.Name
		if prefixes[p.Name] != nil {
			return nil, specErr(etcdFile, field, "duplicate prefix")
		}
		prefixes[p.Name] = p
		ps, _, err := etcdPattern(field+".pattern", p.Pattern, true)
		if err != nil {
			return nil, err
		}
		p.params = ps
		if strings.TrimSpace(p.Doc) == "" {
			return nil, specErr(etcdFile, field+".doc", "missing")
		}
	}
	names := map[string]bool{}
	declared := map[string]*EtcdTxn{}
	for i := range s.Txns {
		declared[s.Txns[i].Name] = &s.Txns[i]
	}
	for i := range s.Txns {
		t := &s.Txns[i]
		if err := checkIdent(etcdFile, fmt.Sprintf("txns[%d].name", i), t.Name); err != nil {
			return nil, err
		}
		field := "txns." + t.Name
		if names[t.Name] {
			return nil, specErr(etcdFile, field, "duplicate transaction")
		}
		names[t.Name] = true
		if strings.TrimSpace(t.Doc) == "" {
			return nil, specErr(etcdFile, field+".doc", "missing")
		}
		if len(t.If) == 0 || len(t.Then) == 0 {
			return nil, specErr(etcdFile, field, "needs an if and a then: every Simba transaction is guarded")
		}
		for j, c := range t.If {
			f := fmt.Sprintf("%s.if[%d]", field, j)
			switch {
			case c.Key != "" && c.Prefix != "":
				return nil, specErr(etcdFile, f, "compares a key or a prefix, not both")
			case c.Prefix != "":
				if prefixes[c.Prefix] == nil {
					return nil, specErr(etcdFile, f+".prefix", "unknown prefix %q", c.Prefix)
				}
			case keys[c.Key] == nil:
				return nil, specErr(etcdFile, f+".key", "unknown key %q", c.Key)
			}
			if etcdTargets[c.Target] == "" {
				return nil, specErr(etcdFile, f+".target", "unknown target %q (want create_revision, mod_revision, version or lease)", c.Target)
			}
			if !slices.Contains([]string{"=", "!=", "<", ">", ">="}, c.Op) {
				return nil, specErr(etcdFile, f+".op", "unknown operator %q", c.Op)
			}
			if _, err := strconv.ParseUint(c.Value, 10, 63); err != nil && c.Value != "token" && c.Value != "lease" && c.Value != "rev" {
				return nil, specErr(etcdFile, f+".value", "%q is neither a non-negative integer nor token, rev or lease", c.Value)
			}
			if (c.Target == "lease") != (c.Value == "lease") && !(c.Target == "lease" && c.Value == "0") {
				return nil, specErr(etcdFile, f+".value", "a lease compares with lease (or 0), a revision or version with a number, token or rev")
			}
			if c.Op == ">=" && c.Value == "0" {
				return nil, specErr(etcdFile, f+".op", ">= 0 always holds")
			}
		}
		for branch, ops := range map[string][]EtcdOp{"then": t.Then, "else": t.Else} {
			for j, o := range ops {
				f := fmt.Sprintf("%s.%s[%d]", field, branch, j)
				switch o.Op {
				case "put", "delete", "get":
					if keys[o.Key] == nil || o.Prefix != "" {
						return nil, specErr(etcdFile, f, "%s needs a declared key (and no prefix), got %q", o.Op, o.Key)
					}
				case "range":
					if prefixes[o.Prefix] == nil || o.Key != "" {
						return nil, specErr(etcdFile, f, "range needs a declared prefix (and no key), got %q", o.Prefix)
					}
				case "txn":
					n := declared[o.Txn]
					if n == nil || o.Key != "" || o.Prefix != "" {
						return nil, specErr(etcdFile, f, "txn needs a declared transaction (and no key or prefix), got %q", o.Txn)
					}
					if n.Name == t.Name || slices.ContainsFunc(slices.Concat(n.Then, n.Else), func(o EtcdOp) bool { return o.Op == "txn" }) {
						return nil, specErr(etcdFile, f+".txn", "%s nests a transaction itself: one level of nesting only", o.Txn)
					}
				default:
					return nil, specErr(etcdFile, f+".op", "unknown operation %q (want put, delete, get, range or txn)", o.Op)
				}
				if o.PrevKV && o.Op != "put" {
					return nil, specErr(etcdFile, f+".prev_kv", "only a put returns the previous version of its key")
				}
				if o.Txn != "" && o.Op != "txn" {
					return nil, specErr(etcdFile, f+".txn", "only a txn op names a transaction")
				}
				if o.First != "" && (o.Op != "range" || o.First != "create_revision") {
					return nil, specErr(etcdFile, f+".first", "only a range reads its first key, by create_revision")
				}
				if (o.Op == "put") != (o.Value != "") {
					return nil, specErr(etcdFile, f+".value", "only a put has a value")
				}
				if o.Op == "put" && o.Value != keys[o.Key].Value {
					return nil, specErr(etcdFile, f+".value", "key %s holds %s, not %q", o.Key, keys[o.Key].Value, o.Value)
				}
			}
		}
	}
	return &s, nil
}

// etcdPattern checks a key or prefix pattern and returns its parameters and its shape (each
// parameter replaced by <>).
func etcdPattern(field, pattern string, isPrefix bool) ([]string, string, error) {
	if !strings.HasPrefix(pattern, "<prefix>/") {
		return nil, "", specErr(etcdFile, field, "%q must start with <prefix>/", pattern)
	}
	if isPrefix != strings.HasSuffix(pattern, "/") {
		return nil, "", specErr(etcdFile, field, "%q: prefixes end in / and keys do not", pattern)
	}
	var params []string
	shape := "<>"
	for _, seg := range strings.Split(strings.TrimSuffix(pattern, "/"), "/")[1:] {
		p, ok := strings.CutPrefix(seg, "<")
		if !ok {
			if seg == "" || strings.ContainsAny(seg, "<>") {
				return nil, "", specErr(etcdFile, field, "bad segment %q", seg)
			}
			shape += "/" + seg
			continue
		}
		p, ok = strings.CutSuffix(p, ">")
		known := slices.ContainsFunc(etcdParams[1:4], func(e struct{ name, typ string }) bool { return e.name == p })
		if !ok || !known {
			return nil, "", specErr(etcdFile, field, "segment %q must be one of <sid>, <name>, <group>", seg)
		}
		if slices.Contains(params, p) {
			return nil, "", specErr(etcdFile, field, "parameter <%s> occurs twice", p)
		}
		params = append(params, p)
		shape += "/<>"
	}
	return append([]string{"prefix"}, params...), shape, nil
}

func genEtcd(specDir string) ([]File, error) {
	s, err := LoadEtcd(specDir)
	if err != nil {
		return nil, err
	}
	w, err := s.genWire()
	if err != nil {
		return nil, err
	}
	t, err := s.genTxns()
	if err != nil {
		return nil, err
	}
	return []File{w, t}, nil
}

// patternExpr builds the Go expression concatenating a pattern's literal parts and parameters.
func patternExpr(pattern string) *jen.Statement {
	var expr *jen.Statement
	add := func(c jen.Code) {
		if expr == nil {
			expr = jen.Add(c)
		} else {
			expr = expr.Op("+").Add(c)
		}
	}
	rest := pattern
	for rest != "" {
		i := strings.IndexByte(rest, '<')
		if i < 0 {
			add(jen.Lit(rest))
			break
		}
		if i > 0 {
			add(jen.Lit(rest[:i]))
		}
		j := strings.IndexByte(rest, '>')
		add(jen.Id(rest[i+1 : j]))
		rest = rest[j+1:]
	}
	return expr
}

func paramList(params []string) []jen.Code {
	var out []jen.Code
	for i, p := range params {
		if i == len(params)-1 {
			out = append(out, jen.Id(p).String())
		} else {
			out = append(out, jen.Id(p))
		}
	}
	return out
}

func (s *EtcdSpec) genWire() (File, error) {
	f := jen.NewFilePathName(wirePkg, "wire")
	f.Comment("EtcdPrefix is the default prefix of every etcd key (spec/etcd.yaml); a DSN's path replaces it.")
	f.Const().Id("EtcdPrefix").Op("=").Lit(s.Prefix)
	for _, k := range s.Keys {
		id := "Etcd" + camel(k.Name) + "Key"
		d := doc(k.Doc)
		f.Comment(cmt(fmt.Sprintf("%s returns the etcd key %q. %s", id, k.Pattern, d)))
		f.Func().Id(id).Params(paramList(k.params)...).String().Block(jen.Return(patternExpr(k.Pattern)))
	}
	for _, p := range s.Prefixes {
		id := "Etcd" + camel(p.Name) + "Prefix"
		d := doc(p.Doc)
		f.Comment(cmt(fmt.Sprintf("%s returns the etcd key prefix %q: %s.", id, p.Pattern, strings.TrimSuffix(d, "."))))
		f.Func().Id(id).Params(paramList(p.params)...).String().Block(jen.Return(patternExpr(p.Pattern)))
	}
	return renderGo("generated/wire/etcd.go", f)
}

// txnParams lists the parameters a transaction uses, in etcdParams order.
func (s *EtcdSpec) txnParams(t EtcdTxn) []struct{ name, typ string } {
	used := map[string]bool{}
	keyParams := func(name string) {
		for _, k := range s.Keys {
			if k.Name == name {
				for _, p := range k.params {
					used[p] = true
				}
			}
		}
	}
	prefixParams := func(name string) {
		for _, p := range s.Prefixes {
			if p.Name == name {
				for _, q := range p.params {
					used[q] = true
				}
			}
		}
	}
	for _, c := range t.If {
		keyParams(c.Key)
		prefixParams(c.Prefix)
		if c.Value == "token" || c.Value == "lease" || c.Value == "rev" {
			used[c.Value] = true
		}
	}
	for _, o := range slices.Concat(t.Then, t.Else) {
		if o.Key != "" {
			keyParams(o.Key)
		}
		prefixParams(o.Prefix)
		for _, n := range s.Txns {
			if n.Name == o.Txn {
				for _, p := range s.txnParams(n) {
					used[p.name] = true
				}
			}
		}
		if o.Op == "put" {
			used["lease"] = true
			if o.Value == "owner" {
				used["owner"] = true
			}
		}
	}
	var out []struct{ name, typ string }
	for _, p := range etcdParams {
		if used[p.name] {
			out = append(out, p)
		}
	}
	return out
}

func (s *EtcdSpec) keyCall(name string) *jen.Statement {
	for _, k := range s.Keys {
		if k.Name == name {
			var args []jen.Code
			for _, p := range k.params {
				args = append(args, jen.Id(p))
			}
			return jen.Qual(wirePkg, "Etcd"+camel(k.Name)+"Key").Call(args...)
		}
	}
	panic("gen: unknown etcd key " + name) // LoadEtcd checked every reference
}

func (s *EtcdSpec) prefixCall(name string) *jen.Statement {
	for _, p := range s.Prefixes {
		if p.Name == name {
			var args []jen.Code
			for _, q := range p.params {
				args = append(args, jen.Id(q))
			}
			return jen.Qual(wirePkg, "Etcd"+camel(p.Name)+"Prefix").Call(args...)
		}
	}
	panic("gen: unknown etcd prefix " + name)
}

func (s *EtcdSpec) opCode(o EtcdOp) jen.Code {
	switch o.Op {
	case "put":
		val := jen.Lit("")
		if o.Value == "owner" {
			val = jen.Id("owner")
		}
		args := []jen.Code{s.keyCall(o.Key), val, jen.Qual(clientv3Pkg, "WithLease").Call(jen.Id("lease"))}
		if o.PrevKV {
			args = append(args, jen.Qual(clientv3Pkg, "WithPrevKV").Call())
		}
		return jen.Qual(clientv3Pkg, "OpPut").Call(args...)
	case "delete":
		return jen.Qual(clientv3Pkg, "OpDelete").Call(s.keyCall(o.Key))
	case "get":
		return jen.Qual(clientv3Pkg, "OpGet").Call(s.keyCall(o.Key))
	case "txn":
		for _, n := range s.Txns {
			if n.Name == o.Txn {
				var args []jen.Code
				for _, p := range s.txnParams(n) {
					args = append(args, jen.Id(p.name))
				}
				// The builder's three results are OpTxn's three parameters.
				return jen.Qual(clientv3Pkg, "OpTxn").Call(jen.Id(camel(n.Name)).Call(args...))
			}
		}
	}
	opts := []jen.Code{s.prefixCall(o.Prefix), jen.Qual(clientv3Pkg, "WithPrefix").Call()}
	if o.First == "create_revision" {
		opts = append(opts,
			jen.Qual(clientv3Pkg, "WithSort").Call(jen.Qual(clientv3Pkg, "SortByCreateRevision"), jen.Qual(clientv3Pkg, "SortAscend")),
			jen.Qual(clientv3Pkg, "WithLimit").Call(jen.Lit(1)))
	}
	return jen.Qual(clientv3Pkg, "OpGet").Call(opts...)
}

func (s *EtcdSpec) genTxns() (File, error) {
	f := jen.NewFilePathName(etcdTxnPkg, "etcdtxn")
	f.ImportAlias(clientv3Pkg, "clientv3")
	f.PackageComment("Package etcdtxn holds the etcd transactions of Simba's wire protocol, generated from\nspec/etcd.yaml: per transaction, a builder of its compares and of the operations of its two\nbranches, and the index of each read in a branch's responses. The etcd backend runs them\nwith one Txn each.")
	for _, t := range s.Txns {
		id := camel(t.Name)
		params := s.txnParams(t)
		var sig []jen.Code
		for i, p := range params {
			st := jen.Id(p.name)
			last := i == len(params)-1 || params[i+1].typ != p.typ
			if last {
				switch p.typ {
				case "string":
					st = st.String()
				case "int64":
					st = st.Int64()
				case "lease":
					st = st.Qual(clientv3Pkg, "LeaseID")
				}
			}
			sig = append(sig, st)
		}
		var cmps []jen.Code
		for _, c := range t.If {
			// etcd compares with =, !=, < and >: "x >= v" is sent as "x > v-1".
			op, less := c.Op, 0
			if op == ">=" {
				op, less = ">", 1
			}
			var v jen.Code
			switch c.Value {
			case "token", "lease", "rev":
				v = jen.Id(c.Value)
				if less > 0 {
					v = jen.Id(c.Value).Op("-").Lit(less)
				}
			default:
				n, _ := strconv.ParseInt(c.Value, 10, 64)
				v = jen.Lit(int(n) - less)
			}
			var subject *jen.Statement
			if c.Prefix != "" {
				subject = s.prefixCall(c.Prefix)
			} else {
				subject = s.keyCall(c.Key)
			}
			cmp := jen.Qual(clientv3Pkg, "Compare").Call(jen.Qual(clientv3Pkg, etcdTargets[c.Target]).Call(subject), jen.Lit(op), v)
			if c.Prefix != "" {
				cmp = cmp.Dot("WithPrefix").Call()
			}
			cmps = append(cmps, cmp)
		}
		branch := func(ops []EtcdOp) jen.Code {
			if len(ops) == 0 {
				return jen.Nil()
			}
			var l []jen.Code
			for _, o := range ops {
				l = append(l, s.opCode(o))
			}
			return jen.Index().Qual(clientv3Pkg, "Op").ValuesFunc(func(g *jen.Group) {
				for _, c := range l {
					g.Line().Add(c)
				}
				g.Line()
			})
		}
		var guard []string
		for _, c := range t.If {
			if c.Prefix != "" {
				guard = append(guard, fmt.Sprintf("%s(every key under %s) %s %s", c.Target, c.Prefix, c.Op, c.Value))
			} else {
				guard = append(guard, fmt.Sprintf("%s(%s) %s %s", c.Target, c.Key, c.Op, c.Value))
			}
		}
		f.Comment(cmt(fmt.Sprintf("%s is the %s transaction, guarded by %s. %s", id, t.Name, strings.Join(guard, " and "), doc(t.Doc))))
		f.Func().Id(id).Params(sig...).Params(jen.Id("cmps").Index().Qual(clientv3Pkg, "Cmp"), jen.List(jen.Id("then"), jen.Id("els")).Index().Qual(clientv3Pkg, "Op")).Block(
			jen.Id("cmps").Op("=").Index().Qual(clientv3Pkg, "Cmp").ValuesFunc(func(g *jen.Group) {
				for _, c := range cmps {
					g.Line().Add(c)
				}
				g.Line()
			}),
			jen.Return(jen.Id("cmps"), branch(t.Then), branch(t.Else)),
		)
		var idx []jen.Code
		for _, b := range []struct {
			name string
			ops  []EtcdOp
		}{{"Then", t.Then}, {"Else", t.Else}} {
			for j, o := range b.ops {
				if o.Op != "get" && o.Op != "range" && o.Op != "txn" && !o.PrevKV {
					continue
				}
				what := "the " + t.Name + " read of " + o.Key + o.Prefix
				if o.First != "" {
					what += " (its first key by " + strings.ReplaceAll(o.First, "_", " ") + ")"
				}
				if o.PrevKV {
					what = "the " + t.Name + " put of " + o.Key + " (with the key's previous version)"
				}
				if o.Op == "txn" {
					what = "the " + t.Name + " transaction's nested " + o.Txn + " transaction (a TxnResponse: its own indexes apply)"
				}
				cid := id + b.name + camel(o.Key+o.Prefix+o.Txn)
				idx = append(idx, jen.Comment(cmt(fmt.Sprintf("%s is the index of %s in the %s branch's responses.", cid, what, strings.ToLower(b.name)))), jen.Id(cid).Op("=").Lit(j))
			}
		}
		if len(idx) > 0 {
			f.Comment(fmt.Sprintf("Response indexes of the %s transaction's reads.", t.Name))
			f.Const().Defs(idx...)
		}
	}
	for _, p := range s.Prefixes {
		id := camel(p.Name) + "Range"
		f.Comment(cmt(fmt.Sprintf("%s returns the read of every key under %s (%s).", id, p.Pattern, strings.TrimSuffix(doc(p.Doc), "."))))
		f.Func().Id(id).Params(paramList(p.params)...).Qual(clientv3Pkg, "Op").Block(jen.Return(s.opCode(EtcdOp{Op: "range", Prefix: p.Name})))
	}
	return renderGo("generated/etcdtxn/etcdtxn.go", f)
}
