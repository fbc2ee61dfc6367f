package gen

import (
	"bytes"
	"fmt"
	"go/token"
	"maps"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"
	"go.yaml.in/yaml/v3"
)

// ZKSpec is spec/zk.yaml: the ZooKeeper paths, node modes, data, tokens and ACL intent.
type ZKSpec struct {
	Root      string `yaml:"root"`
	ACLIntent string `yaml:"acl_intent"`
	// SessionIdentityUser is the user of each session's own digest identity.
	SessionIdentityUser string           `yaml:"session_identity_user"`
	Nodes               []ZKNode         `yaml:"nodes"`
	Perms               map[string]int32 `yaml:"perms"`
	Modes               map[string]int32 `yaml:"modes"`
}

// ZKNode is one kind of node: a fixed path or a pattern with <param> segments.
type ZKNode struct {
	Name  string `yaml:"name"`
	Path  string `yaml:"path"`
	Mode  string `yaml:"mode"`
	Data  string `yaml:"data"`
	Token string `yaml:"token"`
	Doc   string `yaml:"doc"`
	ACL   struct {
		Creator []string `yaml:"creator"`
		World   []string `yaml:"world"`
	} `yaml:"acl"`

	params []string // derived: the <param> segments in order
}

const zkFile = "zk.yaml"

// ZooKeeper's own constants: the spec restates them (so that the layout document is complete)
// and the generator checks them, since they are not Simba's to choose.
var (
	zkPerms = map[string]int32{"read": 1, "write": 2, "create": 4, "delete": 8, "admin": 16}
	// Only ephemeral_sequential of the sequential modes, for waiter queues: a lease's token is
	// its czxid and a lease path must be the name itself so that at most one node per name can
	// exist, so a token node is never sequential (the token check requires mode ephemeral).
	// container (ZooKeeper 3.5.3 and later) is a persistent node that the server deletes once
	// its last child is gone (on its container check, znode.container.checkIntervalMs), for
	// nodes that exist only while they have children: waiter queues.
	zkModes = map[string]int32{"persistent": 0, "ephemeral": 1, "ephemeral_sequential": 3, "container": 4}
)

// zkSeqSep separates a sequential node's last parameter from the 10-digit sequence number
// ZooKeeper appends to the name it is created with.
const zkSeqSep = "-"

// sequential reports whether nodes of n are created with a sequence number appended.
func (n *ZKNode) sequential() bool { return strings.HasSuffix(n.Mode, "_sequential") }

// LoadZK loads and validates spec/zk.yaml.
func LoadZK(specDir string) (*ZKSpec, error) {
	var s ZKSpec
	if err := loadYAML(specDir, zkFile, &s); err != nil {
		return nil, err
	}
	if !maps.Equal(s.Perms, zkPerms) {
		return nil, specErr(zkFile, "perms", "must be ZooKeeper's permission bits %v", sortedMap(zkPerms))
	}
	for m, v := range s.Modes {
		if w, ok := zkModes[m]; !ok || w != v {
			return nil, specErr(zkFile, "modes."+m, "unsupported mode or wrong flag value (supported: %v)", sortedMap(zkModes))
		}
	}
	if err := checkZKPath("root", s.Root); err != nil {
		return nil, err
	}
	if strings.Contains(s.Root, "<") {
		return nil, specErr(zkFile, "root", "has no parameters")
	}
	if strings.TrimSpace(s.ACLIntent) == "" {
		return nil, specErr(zkFile, "acl_intent", "missing: document who may delete Simba's nodes")
	}
	if u := s.SessionIdentityUser; u == "" || strings.ContainsAny(u, ":, \t\n") {
		return nil, specErr(zkFile, "session_identity_user", "must be a digest user name (no ':', ',' or white space), got %q", u)
	}
	if len(s.Nodes) == 0 {
		return nil, specErr(zkFile, "nodes", "no nodes")
	}
	byPath := map[string]*ZKNode{}
	names := map[string]bool{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if err := checkIdent(zkFile, fmt.Sprintf("nodes[%d].name", i), n.Name); err != nil {
			return nil, err
		}
		field := "nodes." + n.Name
		if names[n.Name] {
			return nil, specErr(zkFile, field, "duplicate node")
		}
		names[n.Name] = true
		if err := checkZKPath(field+".path", n.Path); err != nil {
			return nil, err
		}
		if n.Path != s.Root && !strings.HasPrefix(n.Path, s.Root+"/") {
			return nil, specErr(zkFile, field+".path", "%q is not under the root %q", n.Path, s.Root)
		}
		// The pattern with every parameter replaced by one placeholder identifies the node kind.
		shape := n.Path
		seen := map[string]bool{}
		for _, seg := range strings.Split(n.Path[1:], "/") {
			if p, ok := strings.CutPrefix(seg, "<"); ok {
				p, ok = strings.CutSuffix(p, ">")
				if !ok || !identRE.MatchString(p) || token.IsKeyword(p) {
					return nil, specErr(zkFile, field+".path", "segment %q must be a whole parameter like <name>", seg)
				}
				if seen[p] {
					return nil, specErr(zkFile, field+".path", "parameter <%s> occurs twice", p)
				}
				seen[p] = true
				n.params = append(n.params, p)
				shape = strings.Replace(shape, seg, "<>", 1)
			} else if strings.ContainsAny(seg, "<>") {
				return nil, specErr(zkFile, field+".path", "segment %q mixes a parameter with text", seg)
			}
		}
		if other := byPath[shape]; other != nil {
			return nil, specErr(zkFile, field+".path", "same shape as node %s", other.Name)
		}
		byPath[shape] = n
		if _, ok := s.Modes[n.Mode]; !ok {
			return nil, specErr(zkFile, field+".mode", "unknown mode %q (want one of %s)", n.Mode, strings.Join(slices.Sorted(maps.Keys(s.Modes)), ", "))
		}
		if n.sequential() && (len(n.params) == 0 || !strings.HasSuffix(n.Path, "/<"+n.params[len(n.params)-1]+">")) {
			return nil, specErr(zkFile, field+".path", "a sequential node's last segment must be a parameter (ZooKeeper appends %q and its sequence number to it)", zkSeqSep)
		}
		switch n.Data {
		case "", "owner":
		default:
			return nil, specErr(zkFile, field+".data", "unknown data %q (want owner or nothing)", n.Data)
		}
		switch {
		case n.Token == "":
		case n.Token != "czxid":
			return nil, specErr(zkFile, field+".token", "unknown token source %q (want czxid)", n.Token)
		case n.Mode != "ephemeral":
			return nil, specErr(zkFile, field+".token", "only an ephemeral node (a tenure) carries a token")
		}
		if n.Doc == "" {
			return nil, specErr(zkFile, field+".doc", "missing")
		}
		if len(n.ACL.Creator) == 0 {
			return nil, specErr(zkFile, field+".acl.creator", "missing: the creator needs at least one permission")
		}
		for who, perms := range map[string][]string{"creator": n.ACL.Creator, "world": n.ACL.World} {
			for _, p := range perms {
				if _, ok := s.Perms[p]; !ok && p != "all" {
					return nil, specErr(zkFile, field+".acl."+who, "unknown permission %q", p)
				}
			}
		}
		if w := permBits(s.Perms, n.ACL.World); w&(s.Perms["delete"]|s.Perms["write"]|s.Perms["admin"]) != 0 {
			return nil, specErr(zkFile, field+".acl.world", "grants delete, write or admin to everyone: other clients could delete or change Simba's nodes")
		}
	}
	// Every node but the root hangs under a declared, persistent or container node (ephemeral
	// nodes cannot have children); a container node hangs under a persistent one (the server
	// may delete a container at any time its last child is gone, so nothing Simba keeps
	// hangs under one but nodes that keep it alive).
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.Path == s.Root {
			if n.Mode != "persistent" {
				return nil, specErr(zkFile, "nodes."+n.Name+".mode", "the root must be persistent")
			}
			continue
		}
		parent := n.Path[:strings.LastIndexByte(n.Path, '/')]
		shape := parent
		for _, p := range n.params {
			shape = strings.Replace(shape, "<"+p+">", "<>", 1)
		}
		pn := byPath[shape]
		if pn == nil {
			return nil, specErr(zkFile, "nodes."+n.Name+".path", "its parent %q is not a declared node", parent)
		}
		if pn.Mode != "persistent" && pn.Mode != "container" {
			return nil, specErr(zkFile, "nodes."+n.Name+".path", "its parent %s is %s: only persistent and container nodes have children", pn.Name, pn.Mode)
		}
		if pn.Mode == "container" && !strings.HasPrefix(n.Mode, "ephemeral") {
			return nil, specErr(zkFile, "nodes."+n.Name+".path", "its parent %s is a container, which the server deletes once its last child is gone: only ephemeral nodes may hang under one", pn.Name)
		}
	}
	if byPath[s.Root] == nil {
		return nil, specErr(zkFile, "nodes", "the root %q is not declared as a node", s.Root)
	}
	return &s, nil
}

func checkZKPath(field, p string) error {
	if !strings.HasPrefix(p, "/") || p == "/" || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
		return specErr(zkFile, field, "%q is not an absolute ZooKeeper path", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "." || seg == ".." || seg == "zookeeper" && p == "/zookeeper" {
			return specErr(zkFile, field, "%q has a reserved segment %q", p, seg)
		}
	}
	return nil
}

func permBits(perms map[string]int32, names []string) int32 {
	var b int32
	for _, n := range names {
		if n == "all" {
			for _, v := range perms {
				b |= v
			}
			continue
		}
		b |= perms[n]
	}
	return b
}

func sortedMap(m map[string]int32) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func genZK(specDir string) ([]File, error) {
	s, err := LoadZK(specDir)
	if err != nil {
		return nil, err
	}
	layout, err := s.layout()
	if err != nil {
		return nil, err
	}
	goFile, err := s.genGo()
	if err != nil {
		return nil, err
	}
	return []File{layout, goFile}, nil
}

// layout renders zk/layout.yaml: the layout as a document for operators and other
// implementations, with the flag and permission values resolved.
func (s *ZKSpec) layout() (File, error) {
	type acl struct {
		Scheme string   `yaml:"scheme"`
		ID     string   `yaml:"id"`
		Perms  []string `yaml:"perms,flow"`
		Bits   int32    `yaml:"bits"`
	}
	type node struct {
		Path  string `yaml:"path"`
		Mode  string `yaml:"mode"`
		Flags int32  `yaml:"flags"`
		Data  string `yaml:"data,omitempty"`
		Token string `yaml:"token,omitempty"`
		ACL   []acl  `yaml:"acl"`
		Doc   string `yaml:"doc"`
	}
	doc := struct {
		Protocol  string           `yaml:"protocol"`
		Root      string           `yaml:"root"`
		ACLIntent string           `yaml:"acl_intent"`
		Nodes     []node           `yaml:"nodes"`
		Perms     map[string]int32 `yaml:"perms"`
	}{Protocol: "5.x", Root: s.Root, ACLIntent: s.ACLIntent, Perms: s.Perms}
	for _, n := range s.Nodes {
		acls := []acl{{Scheme: "auth", ID: "", Perms: n.ACL.Creator, Bits: permBits(s.Perms, n.ACL.Creator)}}
		if len(n.ACL.World) > 0 {
			acls = append(acls, acl{Scheme: "world", ID: "anyone", Perms: n.ACL.World, Bits: permBits(s.Perms, n.ACL.World)})
		}
		doc.Nodes = append(doc.Nodes, node{Path: n.Path, Mode: n.Mode, Flags: s.Modes[n.Mode], Data: n.Data, Token: n.Token, ACL: acls, Doc: strings.Join(strings.Fields(n.Doc), " ")})
	}
	var buf bytes.Buffer
	buf.WriteString(textHeader("#"))
	buf.WriteString("# The ZooKeeper layout of Simba's wire protocol (from spec/zk.yaml). Paths are relative to the\n# client's chroot; flags are the create flags; bits are ZooKeeper permission bits.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return File{}, fmt.Errorf("gen: rendering zk/layout.yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return File{}, err
	}
	return File{Path: "zk/layout.yaml", Data: buf.Bytes()}, nil
}

func (s *ZKSpec) genGo() (File, error) {
	f := jen.NewFilePathName(wirePkg, "wire")
	f.Comment(cmt("ZKACLIntent is the ACL intent of the ZooKeeper layout (spec/zk.yaml), which the ZooKeeper backend implements: " + strings.Join(strings.Fields(s.ACLIntent), " ")))
	f.Const().Id("ZKACLIntent").Op("=").Lit(s.ACLIntent)
	f.Comment("ZKSessionIdentityUser is the user of the digest identity every session adds for itself when it\nconnects; lease nodes grant WRITE to that identity alone.")
	f.Const().Id("ZKSessionIdentityUser").Op("=").Lit(s.SessionIdentityUser)

	var perms []jen.Code
	for _, p := range slices.SortedFunc(maps.Keys(s.Perms), func(a, b string) int { return int(s.Perms[a] - s.Perms[b]) }) {
		id := "ZKPerm" + camel(p)
		perms = append(perms, jen.Comment(fmt.Sprintf("%s is ZooKeeper's %s permission bit.", id, strings.ToUpper(p))), jen.Id(id).Int32().Op("=").Lit(int(s.Perms[p])))
	}
	perms = append(perms, jen.Comment("ZKPermAll is every permission bit."), jen.Id("ZKPermAll").Int32().Op("=").Lit(int(permBits(s.Perms, []string{"all"}))))
	f.Comment("ZooKeeper permission bits, as zk.ACL.Perms takes them.")
	f.Const().Defs(perms...)

	var modes []jen.Code
	for _, m := range slices.Sorted(maps.Keys(s.Modes)) {
		id := "ZKFlag" + camel(m)
		modes = append(modes, jen.Comment(fmt.Sprintf("%s is the create flag of %s nodes.", id, m)), jen.Id(id).Int32().Op("=").Lit(int(s.Modes[m])))
	}
	f.Comment("ZooKeeper create flags (modes), as zk.Conn.Create takes them.")
	f.Const().Defs(modes...)

	f.Comment("ACL schemes of the layout's ACL entries.")
	f.Const().Defs(
		jen.Comment(`ZKSchemeCreator is the scheme of the creator entry: "auth", the creating connection's`),
		jen.Comment("authenticated (digest) identities."),
		jen.Id("ZKSchemeCreator").Op("=").Lit("auth"),
		jen.Comment(`ZKSchemeWorld and ZKWorldID name the world:anyone entry.`),
		jen.Id("ZKSchemeWorld").Op("=").Lit("world"),
		jen.Comment(`ZKWorldID is the id of the world entry.`),
		jen.Id("ZKWorldID").Op("=").Lit("anyone"),
		jen.Comment(`ZKSchemeDigest is the auth scheme of the DSN's user:password (AddAuth).`),
		jen.Id("ZKSchemeDigest").Op("=").Lit("digest"),
	)

	for _, n := range s.Nodes {
		id := camel(n.Name) + "Path"
		what := fmt.Sprintf("the %s ZooKeeper node %q", n.Mode, n.Path)
		d := strings.Join(strings.Fields(n.Doc), " ")
		d = strings.ToUpper(d[:1]) + strings.TrimSuffix(d[1:], ".") + "."
		if len(n.params) == 0 {
			f.Comment(cmt(fmt.Sprintf("%s is %s. %s", id, what, d)))
			f.Const().Id(id).Op("=").Lit(n.Path)
		} else {
			var params []jen.Code
			var expr *jen.Statement
			rest := n.Path
			for _, p := range n.params {
				i := strings.Index(rest, "<"+p+">")
				params = append(params, jen.Id(p).String())
				lit := jen.Lit(rest[:i])
				if expr == nil {
					expr = lit.Op("+").Id(p)
				} else {
					expr = expr.Op("+").Add(lit).Op("+").Id(p)
				}
				rest = rest[i+len(p)+2:]
			}
			if n.sequential() {
				rest += zkSeqSep
			}
			if rest != "" {
				expr = expr.Op("+").Lit(rest)
			}
			if n.sequential() {
				f.Comment(cmt(fmt.Sprintf("%s returns the path to create %s with: ZooKeeper appends a 10-digit sequence number to it. %s", id, what, d)))
			} else {
				f.Comment(cmt(fmt.Sprintf("%s returns the path of %s. %s", id, what, d)))
			}
			f.Func().Id(id).Params(params...).String().Block(jen.Return(expr))
			if n.sequential() {
				genZKSeqParse(f, &n, id)
			} else {
				genZKParse(f, &n, id)
			}
		}

		cn := camel(n.Name) + "Node"
		f.Comment(fmt.Sprintf("Create flags and ACL permissions of %s nodes.", n.Name))
		f.Const().Defs(
			jen.Comment(fmt.Sprintf("%sFlags is the create flag of %s nodes (%s).", cn, n.Name, n.Mode)),
			jen.Id(cn+"Flags").Op("=").Id("ZKFlag"+camel(n.Mode)),
			jen.Comment(fmt.Sprintf("%sCreatorPerms are the perms of the creator (%s) ACL entry: %s.", cn, "auth", strings.Join(n.ACL.Creator, ", "))),
			jen.Id(cn+"CreatorPerms").Int32().Op("=").Lit(int(permBits(s.Perms, n.ACL.Creator))),
			jen.Comment(fmt.Sprintf("%sWorldPerms are the perms of the world:anyone ACL entry: %s.", cn, strings.Join(append([]string{}, orNone(n.ACL.World)...), ", "))),
			jen.Id(cn+"WorldPerms").Int32().Op("=").Lit(int(permBits(s.Perms, n.ACL.World))),
		)
	}
	f.Comment("zkMatch matches path p against pattern (segments are literal or <param>), storing each")
	f.Comment("parameter's segment in out, in order. It allocates nothing.")
	f.Func().Id("zkMatch").Params(jen.List(jen.Id("p"), jen.Id("pattern")).String(), jen.Id("out").Index().String()).Bool().Block(
		jen.Id("n").Op(":=").Lit(0),
		jen.For(jen.Id("pattern").Op("!=").Lit("").Op("||").Id("p").Op("!=").Lit("")).Block(
			jen.Var().List(jen.Id("ps"), jen.Id("seg")).String(),
			jen.Var().List(jen.Id("okP"), jen.Id("okS")).Bool(),
			jen.List(jen.Id("ps"), jen.Id("pattern"), jen.Id("okP")).Op("=").Qual("strings", "Cut").Call(jen.Id("pattern"), jen.Lit("/")),
			jen.List(jen.Id("seg"), jen.Id("p"), jen.Id("okS")).Op("=").Qual("strings", "Cut").Call(jen.Id("p"), jen.Lit("/")),
			jen.If(jen.Id("okP").Op("!=").Id("okS")).Block(jen.Return(jen.False())),
			jen.If(jen.Qual("strings", "HasPrefix").Call(jen.Id("ps"), jen.Lit("<"))).Block(
				jen.If(jen.Id("seg").Op("==").Lit("").Op("||").Id("n").Op(">=").Len(jen.Id("out"))).Block(jen.Return(jen.False())),
				jen.Id("out").Index(jen.Id("n")).Op("=").Id("seg"),
				jen.Id("n").Op("++"),
			).Else().If(jen.Id("ps").Op("!=").Id("seg")).Block(jen.Return(jen.False())),
		),
		jen.Return(jen.Id("n").Op("==").Len(jen.Id("out"))),
	)
	return renderGo("generated/wire/zk.go", f)
}

// genZKParse emits the inverse of a node's path builder: its parameters.
func genZKParse(f *jen.File, n *ZKNode, id string) {
	// The inverse: the parameters of a path of this kind, from the same pattern.
	var results, zeros, vals []jen.Code
	for i, p := range n.params {
		results = append(results, jen.Id(p).String())
		zeros = append(zeros, jen.Lit(""))
		vals = append(vals, jen.Id("v").Index(jen.Lit(i)))
	}
	results = append(results, jen.Id("ok").Bool())
	f.Comment(cmt(fmt.Sprintf("Parse%s is the inverse of %s: the %s of path p, or ok false if p is not a path of that form (a parameter is one non-empty segment).", id, id, strings.Join(n.params, " and "))))
	f.Func().Id("Parse"+id).Params(jen.Id("p").String()).Params(results...).Block(
		jen.Var().Id("v").Index(jen.Lit(len(n.params))).String(),
		jen.If(jen.Op("!").Id("zkMatch").Call(jen.Id("p"), jen.Lit(n.Path), jen.Id("v").Index(jen.Op(":")))).Block(
			jen.Return(append(zeros, jen.False())...),
		),
		jen.Return(append(vals, jen.True())...),
	)
}

// genZKSeqParse emits the inverse of a sequential node's path builder: its parameters and the
// sequence number ZooKeeper appended to the last one.
func genZKSeqParse(f *jen.File, n *ZKNode, id string) {
	last := len(n.params) - 1
	var results, zeros, vals []jen.Code
	for i, p := range n.params {
		results = append(results, jen.Id(p).String())
		zeros = append(zeros, jen.Lit(""))
		if i < last {
			vals = append(vals, jen.Id("v").Index(jen.Lit(i)))
		}
	}
	results = append(results, jen.Id("seq").Int64(), jen.Id("ok").Bool())
	zeros = append(zeros, jen.Lit(0), jen.False())
	vals = append(vals, jen.Id("p"+camel(n.params[last])), jen.Id("n"), jen.True())
	f.Comment(cmt(fmt.Sprintf("Parse%s is the inverse of %s for a created node: the %s of path p and the sequence number ZooKeeper appended (after %q, 10 digits), or ok false if p is not a path of that form.", id, id, strings.Join(n.params, " and "), zkSeqSep)))
	f.Func().Id("Parse"+id).Params(jen.Id("p").String()).Params(results...).Block(
		jen.Var().Id("v").Index(jen.Lit(len(n.params))).String(),
		jen.If(jen.Op("!").Id("zkMatch").Call(jen.Id("p"), jen.Lit(n.Path), jen.Id("v").Index(jen.Op(":")))).Block(
			jen.Return(zeros...),
		),
		jen.List(jen.Id("p"+camel(n.params[last])), jen.Id("digits"), jen.Id("cut")).Op(":=").Qual("strings", "Cut").Call(jen.Id("v").Index(jen.Lit(last)), jen.Lit(zkSeqSep)),
		jen.If(jen.Op("!").Id("cut").Op("||").Id("p"+camel(n.params[last])).Op("==").Lit("").Op("||").Len(jen.Id("digits")).Op("!=").Lit(10)).Block(
			jen.Return(zeros...),
		),
		jen.List(jen.Id("n"), jen.Id("err")).Op(":=").Qual("strconv", "ParseInt").Call(jen.Id("digits"), jen.Lit(10), jen.Lit(64)),
		// ParseInt takes a sign too ("+0000000007", "-000000000"): only digits are a sequence
		// number, as ZooKeeper writes it.
		jen.If(jen.Id("err").Op("!=").Nil().Op("||").Id("n").Op("<").Lit(0).Op("||").Qual("strings", "Trim").Call(jen.Id("digits"), jen.Lit("0123456789")).Op("!=").Lit("")).Block(
			jen.Return(zeros...),
		),
		jen.Return(vals...),
	)
}

func orNone(l []string) []string {
	if len(l) == 0 {
		return []string{"none"}
	}
	return l
}
