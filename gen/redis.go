package gen

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"go/token"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// RedisSpec is spec/redis.yaml: the Redis key layout, pub/sub channels, reply status codes,
// reply records and the Lua scripts with their typed KEYS, ARGV and reply.
type RedisSpec struct {
	// ErrorPrefix starts the message of every error a script raises (after Redis's "ERR "), so
	// clients can tell Simba's script errors from the server's: ${error_prefix} in Lua,
	// luascripts.ErrorPrefix in Go. Optional.
	ErrorPrefix string `yaml:"error_prefix"`
	// TokenLimit is the least token no grant writes: Lua numbers are doubles, exact only
	// below 2^53, so a script refuses a tenure whose token would reach it. ${token_limit} in
	// Lua, luascripts.TokenLimit in Go (a reader of lease hashes tells such a token apart).
	// Optional; positive when set.
	TokenLimit int64 `yaml:"token_limit"`
	// Errors are the named errors scripts raise, each "ERR <error_prefix> <name> ..." (Lua:
	// 'ERR ${error.<name>} ...'; Go: luascripts.Error<Name>, to match with HasErrorPrefix).
	// They need error_prefix.
	Errors   []RedisError   `yaml:"errors"`
	Keys     []RedisKey     `yaml:"keys"`
	Channels []RedisChannel `yaml:"channels"`
	Statuses []RedisStatus  `yaml:"statuses"`
	Records  []RedisRecord  `yaml:"records"`
	Scripts  []RedisScript  `yaml:"scripts"`
}

// RedisError is a named error a script raises.
type RedisError struct {
	Name string `yaml:"name"`
	Doc  string `yaml:"doc"`
}

// RedisKey is one key pattern, e.g. "simba:lease:{<name>}".
type RedisKey struct {
	Name    string       `yaml:"name"`
	Pattern string       `yaml:"pattern"`
	Type    string       `yaml:"type"`
	Doc     string       `yaml:"doc"`
	Fields  []RedisField `yaml:"fields"`

	param, prefix, suffix string // derived: the pattern is prefix + <param> + suffix
}

// RedisField is one field of a hash key.
type RedisField struct {
	Name string `yaml:"name"`
	Doc  string `yaml:"doc"`
}

// RedisChannel is a pub/sub channel named like a key, carrying the key's parameter.
type RedisChannel struct {
	Name    string `yaml:"name"`
	Key     string `yaml:"key"`
	Payload string `yaml:"payload"`
	Doc     string `yaml:"doc"`
}

// RedisStatus is a status code scripts reply with.
type RedisStatus struct {
	Name  string `yaml:"name"`
	Value int64  `yaml:"value"`
	Doc   string `yaml:"doc"`
}

// RedisRecord is a named tuple that replies carry in lists ("[]<record>").
type RedisRecord struct {
	Name   string       `yaml:"name"`
	Doc    string       `yaml:"doc"`
	Fields []RedisTyped `yaml:"fields"`
}

// RedisTyped is a named, typed value: a reply element, a record field.
type RedisTyped struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"`
	Doc  string `yaml:"doc"`
}

// RedisScript is one Lua script.
type RedisScript struct {
	Name    string           `yaml:"name"`
	Source  string           `yaml:"source"`
	Cluster *bool            `yaml:"cluster"`
	Doc     string           `yaml:"doc"`
	Keys    []RedisScriptKey `yaml:"keys"`
	Args    []RedisScriptArg `yaml:"args"`
	Reply   []RedisTyped     `yaml:"reply"`

	lua string // derived: the exact text of lua/<name>.lua
}

// RedisScriptKey is one KEYS entry (or, with List, a run of KEYS entries) of a script.
type RedisScriptKey struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
	List bool   `yaml:"list"`
	Doc  string `yaml:"doc"`
	// Caller: the key is the caller's own (a key Simba does not lay out, such as the user key a
	// fence script guards), so it names no key pattern; the caller keeps it in the hash slot of
	// the script's other keys.
	Caller bool `yaml:"caller"`
}

// RedisScriptArg is one ARGV entry (or, for a list type, a run of ARGV entries) of a script.
type RedisScriptArg struct {
	Name    string `yaml:"name"`
	Type    string `yaml:"type"`
	CountOf string `yaml:"count_of"`
	LenOf   string `yaml:"len_of"`
	Doc     string `yaml:"doc"`
}

const (
	redisFile    = "redis.yaml"
	luascriptPkg = "github.com/simba-go/simba/generated/luascripts"
	goRedisPkg   = "github.com/redis/go-redis/v9"
)

var (
	keyTypes      = []string{"hash", "set", "zset", "string"}
	argTypes      = []string{"string", "int64", "[]string", "[]int64"}
	scalarTypes   = []string{"string", "int64"}
	placeholderRE = regexp.MustCompile(`\$\{([^}]*)\}`)
	keysIndexRE   = regexp.MustCompile(`\bKEYS\[(\d+)\]`)
	argvIndexRE   = regexp.MustCompile(`\bARGV\[(\d+)\]`)
	// int64NameRE matches the names of values that must be int64: tokens and milliseconds (the
	// words token, ms, expiry, remaining and ttl, as the sqlc output check uses).
	int64NameRE = regexp.MustCompile(`(^|_)(tokens?|ms|expiry|remaining|ttl)(_|$)`)
)

// LoadRedis loads and validates spec/redis.yaml and the Lua sources it names.
func LoadRedis(specDir string) (*RedisSpec, error) {
	var s RedisSpec
	if err := loadYAML(specDir, redisFile, &s); err != nil {
		return nil, err
	}
	keys, err := s.checkKeys()
	if err != nil {
		return nil, err
	}
	if err := s.checkChannels(keys); err != nil {
		return nil, err
	}
	subst, err := s.checkStatuses(keys)
	if err != nil {
		return nil, err
	}
	records, err := s.checkRecords()
	if err != nil {
		return nil, err
	}
	if len(s.Scripts) == 0 {
		return nil, specErr(redisFile, "scripts", "no scripts")
	}
	seen := map[string]bool{}
	for i := range s.Scripts {
		sc := &s.Scripts[i]
		if err := checkIdent(redisFile, fmt.Sprintf("scripts[%d].name", i), sc.Name); err != nil {
			return nil, err
		}
		if seen[sc.Name] {
			return nil, specErr(redisFile, "scripts."+sc.Name, "duplicate script")
		}
		seen[sc.Name] = true
		if err := sc.check(specDir, keys, records, subst); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

func (s *RedisSpec) checkKeys() (map[string]*RedisKey, error) {
	if len(s.Keys) == 0 {
		return nil, specErr(redisFile, "keys", "no keys")
	}
	keys := map[string]*RedisKey{}
	patterns := map[string]string{}
	for i := range s.Keys {
		k := &s.Keys[i]
		if err := checkIdent(redisFile, fmt.Sprintf("keys[%d].name", i), k.Name); err != nil {
			return nil, err
		}
		field := "keys." + k.Name
		if keys[k.Name] != nil {
			return nil, specErr(redisFile, field, "duplicate key")
		}
		keys[k.Name] = k
		if other, dup := patterns[k.Pattern]; dup {
			return nil, specErr(redisFile, field+".pattern", "same pattern as key %s", other)
		}
		patterns[k.Pattern] = k.Name
		open := strings.IndexByte(k.Pattern, '{')
		close := strings.IndexByte(k.Pattern, '}')
		if open < 0 || close < open || strings.Count(k.Pattern, "{") != 1 || strings.Count(k.Pattern, "}") != 1 {
			return nil, specErr(redisFile, field+".pattern", "%q must hold exactly one hash tag {<param>}", k.Pattern)
		}
		tag := k.Pattern[open+1 : close]
		if len(tag) < 3 || tag[0] != '<' || tag[len(tag)-1] != '>' {
			return nil, specErr(redisFile, field+".pattern", "the hash tag of %q must be exactly one parameter like {<name>}", k.Pattern)
		}
		k.param = tag[1 : len(tag)-1]
		if err := checkIdent(redisFile, field+".pattern", k.param); err != nil {
			return nil, err
		}
		if token.IsKeyword(k.param) {
			return nil, specErr(redisFile, field+".pattern", "parameter %q is a Go keyword", k.param)
		}
		k.prefix, k.suffix = k.Pattern[:open+1], k.Pattern[close:]
		if strings.ContainsAny(k.prefix+k.suffix, "*?[]\\<> \t\n") {
			return nil, specErr(redisFile, field+".pattern", "%q contains glob, space or angle-bracket characters outside its parameter", k.Pattern)
		}
		if k.prefix == "{" {
			return nil, specErr(redisFile, field+".pattern", "%q needs a literal prefix before its hash tag", k.Pattern)
		}
		if !slices.Contains(keyTypes, k.Type) {
			return nil, specErr(redisFile, field+".type", "unknown Redis type %q (want one of %s)", k.Type, strings.Join(keyTypes, ", "))
		}
		if k.Type != "hash" && len(k.Fields) > 0 {
			return nil, specErr(redisFile, field+".fields", "only hash keys have fields")
		}
		if k.Type == "hash" && len(k.Fields) == 0 {
			return nil, specErr(redisFile, field+".fields", "a hash key lists its fields")
		}
		fields := map[string]bool{}
		for j, f := range k.Fields {
			if err := checkIdent(redisFile, fmt.Sprintf("%s.fields[%d]", field, j), f.Name); err != nil {
				return nil, err
			}
			if fields[f.Name] {
				return nil, specErr(redisFile, field+".fields."+f.Name, "duplicate field")
			}
			fields[f.Name] = true
		}
	}
	return keys, nil
}

func (s *RedisSpec) checkChannels(keys map[string]*RedisKey) error {
	seen := map[string]bool{}
	for i, c := range s.Channels {
		if err := checkIdent(redisFile, fmt.Sprintf("channels[%d].name", i), c.Name); err != nil {
			return err
		}
		field := "channels." + c.Name
		if seen[c.Name] {
			return specErr(redisFile, field, "duplicate channel")
		}
		seen[c.Name] = true
		k := keys[c.Key]
		if k == nil {
			return specErr(redisFile, field+".key", "unknown key %q", c.Key)
		}
		if c.Payload != k.param {
			return specErr(redisFile, field+".payload", "must be the key's parameter %q, got %q", k.param, c.Payload)
		}
	}
	return nil
}

// checkStatuses validates the status codes and returns the placeholder substitutions for Lua:
// ${status.<name>} and ${<hash key>.<field>}.
var errorPrefixRE = regexp.MustCompile(`^[a-z]+:$`)

func (s *RedisSpec) checkStatuses(keys map[string]*RedisKey) (map[string]string, error) {
	subst := map[string]string{}
	for _, k := range s.Keys {
		for _, f := range k.Fields {
			subst[k.Name+"."+f.Name] = f.Name
		}
	}
	if s.ErrorPrefix != "" {
		if !errorPrefixRE.MatchString(s.ErrorPrefix) {
			return nil, specErr(redisFile, "error_prefix", "%q must be lowercase letters and a colon, like \"simba:\"", s.ErrorPrefix)
		}
		subst["error_prefix"] = s.ErrorPrefix
	}
	if s.TokenLimit < 0 {
		return nil, specErr(redisFile, "token_limit", "%d must be positive", s.TokenLimit)
	}
	if s.TokenLimit > 0 {
		subst["token_limit"] = strconv.FormatInt(s.TokenLimit, 10)
	}
	for i, e := range s.Errors {
		if err := checkIdent(redisFile, fmt.Sprintf("errors[%d].name", i), e.Name); err != nil {
			return nil, err
		}
		if s.ErrorPrefix == "" {
			return nil, specErr(redisFile, "errors."+e.Name, "named errors need error_prefix")
		}
		if _, dup := subst["error."+e.Name]; dup {
			return nil, specErr(redisFile, "errors."+e.Name, "duplicate error")
		}
		subst["error."+e.Name] = s.ErrorPrefix + " " + e.Name
	}
	values := map[int64]string{}
	for i, st := range s.Statuses {
		if err := checkIdent(redisFile, fmt.Sprintf("statuses[%d].name", i), st.Name); err != nil {
			return nil, err
		}
		field := "statuses." + st.Name
		if _, dup := subst["status."+st.Name]; dup {
			return nil, specErr(redisFile, field, "duplicate status")
		}
		if keys["status"] != nil {
			return nil, specErr(redisFile, "keys.status", "the key name status is reserved for status placeholders")
		}
		if st.Value < 1 {
			return nil, specErr(redisFile, field+".value", "must be positive, got %d", st.Value)
		}
		if other, dup := values[st.Value]; dup {
			return nil, specErr(redisFile, field+".value", "%d is also the value of %s", st.Value, other)
		}
		values[st.Value] = st.Name
		subst["status."+st.Name] = strconv.FormatInt(st.Value, 10)
	}
	return subst, nil
}

func (s *RedisSpec) checkRecords() (map[string]*RedisRecord, error) {
	records := map[string]*RedisRecord{}
	for i := range s.Records {
		r := &s.Records[i]
		if err := checkIdent(redisFile, fmt.Sprintf("records[%d].name", i), r.Name); err != nil {
			return nil, err
		}
		field := "records." + r.Name
		if records[r.Name] != nil {
			return nil, specErr(redisFile, field, "duplicate record")
		}
		records[r.Name] = r
		if len(r.Fields) == 0 {
			return nil, specErr(redisFile, field+".fields", "a record has at least one field")
		}
		if err := checkTyped(field+".fields", r.Fields, scalarTypes, nil); err != nil {
			return nil, err
		}
	}
	return records, nil
}

// checkTyped checks names (lower_snake, unique), types (one of allowed, or "[]<record>" when
// records is given) and that tokens and milliseconds are int64.
func checkTyped(field string, vals []RedisTyped, allowed []string, records map[string]*RedisRecord) error {
	seen := map[string]bool{}
	for i, v := range vals {
		if err := checkIdent(redisFile, fmt.Sprintf("%s[%d].name", field, i), v.Name); err != nil {
			return err
		}
		f := field + "." + v.Name
		if seen[v.Name] {
			return specErr(redisFile, f, "duplicate name")
		}
		seen[v.Name] = true
		ok := slices.Contains(allowed, v.Type)
		if rec, isList := strings.CutPrefix(v.Type, "[]"); isList && records != nil && records[rec] != nil {
			ok = true
		}
		if !ok {
			return specErr(redisFile, f+".type", "unknown type %q (want one of %s%s)", v.Type, strings.Join(allowed, ", "), map[bool]string{true: ", []<record>"}[records != nil])
		}
		if err := checkInt64(f, v.Name, v.Type); err != nil {
			return err
		}
	}
	return nil
}

// checkInt64 enforces DESIGN.md §6: every token and millisecond value is int64 in generated Go.
func checkInt64(field, name, typ string) error {
	if int64NameRE.MatchString(name) && typ != "int64" && typ != "[]int64" {
		return specErr(redisFile, field+".type", "%s is a token or millisecond value and must be int64 (or []int64), got %s", name, typ)
	}
	return nil
}

func (sc *RedisScript) check(specDir string, keys map[string]*RedisKey, records map[string]*RedisRecord, subst map[string]string) error {
	field := "scripts." + sc.Name
	if sc.Cluster == nil {
		return specErr(redisFile, field+".cluster", "missing: say whether every key of one call lies in one hash slot")
	}
	if sc.Doc == "" {
		return specErr(redisFile, field+".doc", "missing")
	}
	if len(sc.Keys) == 0 {
		return specErr(redisFile, field+".keys", "a script touches at least one key, passed in KEYS")
	}
	names := map[string]*RedisScriptKey{}
	lists := 0
	for i := range sc.Keys {
		k := &sc.Keys[i]
		if err := checkIdent(redisFile, fmt.Sprintf("%s.keys[%d].name", field, i), k.Name); err != nil {
			return err
		}
		f := field + ".keys." + k.Name
		if names[k.Name] != nil {
			return specErr(redisFile, f, "duplicate key")
		}
		names[k.Name] = k
		switch {
		case k.Caller && (k.Key != "" || k.List):
			return specErr(redisFile, f, "a caller key names no key pattern and is not a list")
		case k.Caller && strings.TrimSpace(k.Doc) == "":
			return specErr(redisFile, f+".doc", "missing: say what the caller's key is")
		case k.Caller && i == 0:
			return specErr(redisFile, f, "a caller key comes after a key Simba lays out (whose slot it shares)")
		case !k.Caller && keys[k.Key] == nil:
			return specErr(redisFile, f+".key", "unknown key %q", k.Key)
		}
		if k.List {
			lists++
		} else if lists > 0 {
			return specErr(redisFile, f, "single keys come before list keys")
		}
	}
	if *sc.Cluster {
		if err := sc.checkOneSlot(field, keys, lists); err != nil {
			return err
		}
	}
	counted := map[string]bool{}
	lenOf := map[string]bool{}
	argNames := map[string]bool{}
	listArgs := false
	for i, a := range sc.Args {
		if err := checkIdent(redisFile, fmt.Sprintf("%s.args[%d].name", field, i), a.Name); err != nil {
			return err
		}
		f := field + ".args." + a.Name
		if argNames[a.Name] {
			return specErr(redisFile, f, "duplicate argument")
		}
		argNames[a.Name] = true
		if !slices.Contains(argTypes, a.Type) {
			return specErr(redisFile, f+".type", "unknown type %q (want one of %s)", a.Type, strings.Join(argTypes, ", "))
		}
		if err := checkInt64(f, a.Name, a.Type); err != nil {
			return err
		}
		isList := strings.HasPrefix(a.Type, "[]")
		switch {
		case a.CountOf != "" && a.LenOf != "":
			return specErr(redisFile, f, "count_of and len_of exclude each other")
		case a.CountOf != "":
			if k := names[a.CountOf]; k == nil || !k.List {
				return specErr(redisFile, f+".count_of", "%q is not a list key of this script", a.CountOf)
			}
			if a.Type != "int64" {
				return specErr(redisFile, f+".type", "a count is int64, got %s", a.Type)
			}
			if counted[a.CountOf] {
				return specErr(redisFile, f+".count_of", "%s is already counted", a.CountOf)
			}
			counted[a.CountOf] = true
		case a.LenOf != "":
			if k := names[a.LenOf]; k == nil || !k.List {
				return specErr(redisFile, f+".len_of", "%q is not a list key of this script", a.LenOf)
			}
			if !isList {
				return specErr(redisFile, f+".len_of", "only list arguments have a length")
			}
			lenOf[a.LenOf] = true
		case isList:
			return specErr(redisFile, f+".len_of", "missing: a list argument's length must be that of a list key, so that the script can split ARGV")
		}
		if isList {
			listArgs = true
		} else if listArgs {
			return specErr(redisFile, f, "single arguments come before list arguments")
		}
	}
	if uncounted := lists - len(counted); uncounted > 1 {
		return specErr(redisFile, field+".keys", "%d list keys but only %d count_of arguments: the script cannot split KEYS", lists, len(counted))
	}
	if len(sc.Reply) == 0 {
		return specErr(redisFile, field+".reply", "empty: a script replies with an array of at least one value")
	}
	if err := checkTyped(field+".reply", sc.Reply, []string{"int64", "string", "[]string", "[]int64", "[][]string"}, records); err != nil {
		return err
	}
	return sc.loadLua(specDir, field, keys, subst, lists > 0, listArgs)
}

// checkOneSlot: a script marked cluster must keep every call inside one hash slot. Either its
// keys are one list (the caller passes keys of one slot) or all its single keys share the hash
// tag parameter (so one value of it puts them in one slot).
func (sc *RedisScript) checkOneSlot(field string, keys map[string]*RedisKey, lists int) error {
	if lists > 0 {
		if len(sc.Keys) != 1 {
			return specErr(redisFile, field+".cluster", "a cluster script with a list key has no other key (the caller groups the list by slot)")
		}
		return nil
	}
	first := keys[sc.Keys[0].Key]
	for _, k := range sc.Keys[1:] {
		if k.Caller {
			continue // the caller keeps it in the slot of the others
		}
		if p := keys[k.Key].param; p != first.param {
			return specErr(redisFile, field+".cluster", "keys %s and %s hash to different slots ({<%s>} and {<%s>})", sc.Keys[0].Name, k.Name, first.param, p)
		}
	}
	return nil
}

// loadLua reads the script's source, substitutes the placeholders and checks that it indexes
// KEYS and ARGV within bounds and builds no key itself.
func (sc *RedisScript) loadLua(specDir, field string, keys map[string]*RedisKey, subst map[string]string, listKeys, listArgs bool) error {
	if !strings.HasPrefix(sc.Source, "lua/") || path.Ext(sc.Source) != ".lua" || path.Clean(sc.Source) != sc.Source {
		return specErr(redisFile, field+".source", "must be a file lua/<name>.lua under spec/, got %q", sc.Source)
	}
	data, err := readSpecFile(specDir, sc.Source)
	if err != nil {
		return err
	}
	src := string(data)
	if strings.ContainsAny(src, "\r`") {
		return specErr(sc.Source, "", "contains a carriage return or a backquote")
	}
	if strings.TrimSpace(src) == "" {
		return specErr(sc.Source, "", "empty script")
	}
	for n, line := range strings.Split(src, "\n") {
		for _, m := range placeholderRE.FindAllStringSubmatch(line, -1) {
			if _, ok := subst[m[1]]; !ok {
				return specErr(sc.Source, fmt.Sprintf("line %d", n+1), "unknown placeholder %s (want ${<hash key>.<field>}, ${status.<name>}, ${error.<name>}, ${error_prefix} or ${token_limit})", m[0])
			}
		}
		code, _, _ := strings.Cut(line, "--")
		for _, k := range keys {
			if strings.Contains(code, k.prefix) {
				return specErr(sc.Source, fmt.Sprintf("line %d", n+1), "builds the key %s inside Lua; pass every key in KEYS", k.Name)
			}
		}
		if !listKeys {
			for _, m := range keysIndexRE.FindAllStringSubmatch(code, -1) {
				if i, _ := strconv.Atoi(m[1]); i < 1 || i > len(sc.Keys) {
					return specErr(sc.Source, fmt.Sprintf("line %d", n+1), "%s is out of range: the script has %d keys", m[0], len(sc.Keys))
				}
			}
		}
		if !listArgs {
			for _, m := range argvIndexRE.FindAllStringSubmatch(code, -1) {
				if i, _ := strconv.Atoi(m[1]); i < 1 || i > len(sc.Args) {
					return specErr(sc.Source, fmt.Sprintf("line %d", n+1), "%s is out of range: the script has %d arguments", m[0], len(sc.Args))
				}
			}
		}
	}
	src = placeholderRE.ReplaceAllStringFunc(src, func(m string) string { return subst[m[2:len(m)-1]] })
	if !strings.HasSuffix(src, "\n") {
		src += "\n"
	}
	sc.lua = textHeader("--") + src
	return nil
}

func genRedis(specDir string) ([]File, error) {
	s, err := LoadRedis(specDir)
	if err != nil {
		return nil, err
	}
	var out []File
	wf, err := s.genWire()
	if err != nil {
		return nil, err
	}
	out = append(out, wf)
	common, err := s.genCommon()
	if err != nil {
		return nil, err
	}
	out = append(out, common)
	keys := map[string]*RedisKey{}
	for i := range s.Keys {
		keys[s.Keys[i].Name] = &s.Keys[i]
	}
	for i := range s.Scripts {
		sc := &s.Scripts[i]
		out = append(out, File{Path: "lua/" + sc.Name + ".lua", Data: []byte(sc.lua)})
		f, err := sc.genGo(keys)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// doc renders a spec doc string as one paragraph.
func doc(s string) string { return strings.Join(strings.Fields(s), " ") }

// sentence renders a spec doc string as one paragraph starting with a capital and ending with a
// period.
func sentence(s string) string {
	s = strings.TrimSuffix(doc(s), ".")
	if s == "" {
		return ""
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// cmt renders text as a // comment folded at about 95 columns (jen renders a multi-line
// comment string that starts with "//" as is).
func cmt(text string) string {
	return "// " + strings.ReplaceAll(wrap(text), "\n", "\n// ")
}

// wrap folds text into lines of about 95 columns.
func wrap(text string) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(text) {
		if n > 0 && n+1+len(w) > 95 {
			b.WriteByte('\n')
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

func (s *RedisSpec) genWire() (File, error) {
	f := jen.NewFilePathName(wirePkg, "wire")
	for _, k := range s.Keys {
		fn := camel(k.Name) + "Key"
		f.Comment(cmt(fmt.Sprintf("%s returns the Redis key %q (a %s). %s", fn, k.Pattern, k.Type, sentence(k.Doc))))
		f.Func().Id(fn).Params(jen.Id(k.param).String()).String().Block(
			jen.Return(jen.Lit(k.prefix).Op("+").Id(k.param).Op("+").Lit(k.suffix)),
		)
		f.Comment(cmt(fmt.Sprintf("%sType is the Redis type of the %s key (TYPE's reply for a key Simba wrote).", fn, k.Name)))
		f.Const().Id(fn + "Type").Op("=").Lit(k.Type)
		match := k.prefix + "*" + k.suffix
		f.Comment(cmt(fmt.Sprintf("%sMatch is the glob (SCAN MATCH, PSUBSCRIBE) that matches every %s key.", fn, k.Name)))
		f.Const().Id(fn + "Match").Op("=").Lit(match)
		f.Comment(cmt(fmt.Sprintf("Parse%s returns the %s of a key made by %s, and false for any other string.", fn, k.param, fn)))
		f.Func().Id("Parse"+fn).Params(jen.Id("key").String()).Params(jen.Id(k.param).String(), jen.Id("ok").Bool()).Block(
			jen.Id("rest").Op(",").Id("ok").Op(":=").Qual("strings", "CutPrefix").Call(jen.Id("key"), jen.Lit(k.prefix)),
			jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.Lit(""), jen.False())),
			jen.Id(k.param).Op(",").Id("ok").Op("=").Qual("strings", "CutSuffix").Call(jen.Id("rest"), jen.Lit(k.suffix)),
			jen.If(jen.Op("!").Id("ok").Op("||").Id(k.param).Op("==").Lit("").Op("||").Qual("strings", "ContainsAny").Call(jen.Id(k.param), jen.Lit("{}"))).Block(jen.Return(jen.Lit(""), jen.False())),
			jen.Return(jen.Id(k.param), jen.True()),
		)
		if len(k.Fields) > 0 {
			var defs []jen.Code
			for _, fl := range k.Fields {
				id := camel(k.Name) + "Field" + camel(fl.Name)
				defs = append(defs, jen.Comment(cmt(fmt.Sprintf("%s is the field %q: %s.", id, fl.Name, strings.TrimSuffix(doc(fl.Doc), ".")))), jen.Id(id).Op("=").Lit(fl.Name))
			}
			f.Comment(fmt.Sprintf("The fields of the %s hash (%s).", k.Name, fn))
			f.Const().Defs(defs...)
		}
	}
	var cases []jen.Code
	for _, k := range s.Keys {
		fn := camel(k.Name) + "Key"
		cases = append(cases, jen.If(jen.List(jen.Id("_"), jen.Id("ok")).Op(":=").Id("Parse"+fn).Call(jen.Id("key")), jen.Id("ok")).Block(jen.Return(jen.Id(fn+"Type"))))
	}
	cases = append(cases, jen.Return(jen.Lit("")))
	f.Comment(cmt("RedisKeyType returns the Redis type Simba keeps at key (the *KeyType of the key it parses as: TYPE's reply for a key Simba wrote), and \"\" for a key that is none of Simba's."))
	f.Func().Id("RedisKeyType").Params(jen.Id("key").String()).String().Block(cases...)
	keys := map[string]RedisKey{}
	for _, k := range s.Keys {
		keys[k.Name] = k
	}
	for _, c := range s.Channels {
		k := keys[c.Key]
		fn := camel(c.Name) + "Channel"
		f.Comment(cmt(fmt.Sprintf("%s is the pub/sub channel %q, the same string as %sKey(%s); the message is the %s. %s", fn, k.Pattern, camel(k.Name), k.param, c.Payload, sentence(c.Doc))))
		f.Func().Id(fn).Params(jen.Id(k.param).String()).String().Block(jen.Return(jen.Id(camel(k.Name) + "Key").Call(jen.Id(k.param))))
		f.Comment(cmt(fmt.Sprintf("%sMatch is the PSUBSCRIBE pattern that matches every %s channel.", fn, c.Name)))
		f.Const().Id(fn + "Match").Op("=").Id(camel(k.Name) + "KeyMatch")
	}
	return renderGo("generated/wire/redis.go", f)
}

// statusIdent is the Go name of a status code: Status + CamelCase, with "ok" as OK.
func statusIdent(name string) string {
	if name == "ok" {
		return "StatusOK"
	}
	return "Status" + camel(name)
}

// goType is the Go type of a spec type.
func goType(t string) jen.Code {
	switch t {
	case "int64":
		return jen.Int64()
	case "string":
		return jen.String()
	case "[]string":
		return jen.Index().String()
	case "[]int64":
		return jen.Index().Int64()
	case "[][]string":
		return jen.Index().Index().String()
	}
	return jen.Index().Id(camel(strings.TrimPrefix(t, "[]")))
}

// decodeFunc is the name of the common helper that decodes a reply value of type t.
func decodeFunc(t string) string {
	switch t {
	case "int64":
		return "replyInt64"
	case "string":
		return "replyString"
	case "[]string":
		return "replyStrings"
	case "[]int64":
		return "replyInt64s"
	case "[][]string":
		return "replyStringLists"
	}
	return "reply" + camel(strings.TrimPrefix(t, "[]")) + "List"
}

func (s *RedisSpec) genCommon() (File, error) {
	f := jen.NewFilePathName(luascriptPkg, "luascripts")
	f.ImportName(goRedisPkg, "redis")
	f.PackageComment(cmt("Package luascripts holds Simba's Redis Lua scripts with typed wrappers on go-redis v9: per script its exact source (the file under lua/), its SHA1, typed KEYS and ARGV, a Run that sends EVALSHA and falls back to EVAL on NOSCRIPT, and typed reply decoding. Every token and millisecond is int64. Generated from spec/redis.yaml by simbagen; never edit it by hand."))

	var defs []jen.Code
	for _, st := range s.Statuses {
		id := statusIdent(st.Name)
		defs = append(defs, jen.Comment(cmt(fmt.Sprintf("%s (%d): %s.", id, st.Value, strings.TrimSuffix(doc(st.Doc), ".")))), jen.Id(id).Int64().Op("=").Lit(int(st.Value)))
	}
	if len(defs) > 0 {
		f.Comment("The status codes scripts reply with.")
		f.Const().Defs(defs...)
	}
	if s.ErrorPrefix != "" {
		f.Comment(cmt("ErrorPrefix starts the message of every error a script raises (after Redis's \"ERR \"): go-redis's HasErrorPrefix(err, ErrorPrefix) tells them from the server's own errors."))
		f.Const().Id("ErrorPrefix").Op("=").Lit(s.ErrorPrefix)
	}
	if s.TokenLimit > 0 {
		f.Comment(cmt("TokenLimit is the least token no grant writes (Lua numbers are doubles, exact only below it): a script refuses a tenure whose token would reach it, and a stored token at or above it, with ErrorTokenOverflow."))
		f.Const().Id("TokenLimit").Int64().Op("=").Lit(int(s.TokenLimit))
	}
	if len(s.Errors) > 0 {
		var defs []jen.Code
		for _, e := range s.Errors {
			id := "Error" + camel(e.Name)
			defs = append(defs, jen.Comment(cmt(fmt.Sprintf("%s: %s. A script raises it as \"ERR %s ...\".", id, strings.TrimSuffix(doc(e.Doc), "."), s.ErrorPrefix+" "+e.Name))),
				jen.Id(id).Op("=").Lit(s.ErrorPrefix+" "+e.Name))
		}
		f.Comment(cmt("The named errors scripts raise: match one with go-redis's HasErrorPrefix(err, Error<Name>)."))
		f.Const().Defs(defs...)
	}

	f.Comment("Info describes one script.")
	f.Type().Id("Info").Struct(
		jen.Id("Name").String().Comment("the script's name in spec/redis.yaml"),
		jen.Id("Source").String().Comment("the exact Lua text sent, as in lua/<Name>.lua"),
		jen.Id("SHA1").String().Comment("the SHA1 of Source in lowercase hex, as SCRIPT LOAD returns it"),
		jen.Id("Cluster").Bool().Comment("every key of one call lies in one hash slot (safe under routeBySlot)"),
	)
	var all []jen.Code
	for _, sc := range s.Scripts {
		n := camel(sc.Name)
		all = append(all, jen.Values(jen.Dict{
			jen.Id("Name"): jen.Lit(sc.Name), jen.Id("Source"): jen.Id(n + "Source"),
			jen.Id("SHA1"): jen.Id(n + "SHA1"), jen.Id("Cluster"): jen.Lit(*sc.Cluster),
		}))
	}
	f.Comment("All lists every script in spec order.")
	f.Var().Id("All").Op("=").Index().Id("Info").Values(all...)

	f.Comment("ErrReply is matched (errors.Is) by every error a Decode returns for a reply of the wrong shape.")
	f.Var().Id("ErrReply").Op("=").Qual("errors", "New").Call(jen.Lit("luascripts: unexpected reply"))
	f.Comment(cmt("ErrArgs is matched (errors.Is) by every error Build returns for list arguments whose length differs from their list keys'."))
	f.Var().Id("ErrArgs").Op("=").Qual("errors", "New").Call(jen.Lit("luascripts: inconsistent arguments"))

	f.Comment(cmt("IsNoScript reports whether err is Redis's NOSCRIPT error: the server's script cache lacks the script (after a restart, a failover or SCRIPT FLUSH). Check it after a pipelined EvalSha."))
	f.Func().Id("IsNoScript").Params(jen.Err().Error()).Bool().Block(
		jen.Return(jen.Err().Op("!=").Nil().Op("&&").Parens(jen.Qual("errors", "Is").Call(jen.Err(), jen.Qual(goRedisPkg, "ErrNoScript")).Op("||").Qual(goRedisPkg, "HasErrorPrefix").Call(jen.Err(), jen.Lit("NOSCRIPT")))),
	)

	f.Comment(cmt("LoadAll loads every script into the script cache of the server c talks to (SCRIPT LOAD) and checks that the server computes the SHA1 generated here. A *redis.ClusterClient runs SCRIPT LOAD on every shard by itself; a pipeline does not load anything."))
	f.Func().Id("LoadAll").Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("c").Qual(goRedisPkg, "Scripter")).Error().Block(
		jen.For(jen.List(jen.Id("_"), jen.Id("s")).Op(":=").Range().Id("All")).Block(
			jen.List(jen.Id("sha"), jen.Err()).Op(":=").Id("c").Dot("ScriptLoad").Call(jen.Id("ctx"), jen.Id("s").Dot("Source")).Dot("Result").Call(),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("luascripts: loading %s: %w"), jen.Id("s").Dot("Name"), jen.Err()))),
			jen.If(jen.Id("sha").Op("!=").Id("s").Dot("SHA1")).Block(jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: SCRIPT LOAD of %s returned %s, want %s"), jen.Id("ErrReply"), jen.Id("s").Dot("Name"), jen.Id("sha"), jen.Id("s").Dot("SHA1")))),
		),
		jen.Return(jen.Nil()),
	)

	// run: EVALSHA, then EVAL (which also caches the script) on NOSCRIPT.
	ctxP := jen.Id("ctx").Qual("context", "Context")
	scripterP := jen.Id("c").Qual(goRedisPkg, "Scripter")
	f.Comment(cmt("run sends argv, a script call's EVALSHA command as a script's argv builds it, and, if the server lacks the script, the same command as EVAL with the source src, which also caches the script. The EVAL gets a list of its own: the EVALSHA command keeps argv."))
	f.Func().Id("run").Params(ctxP, scripterP, jen.List(jen.Id("name"), jen.Id("src")).String(), jen.Id("argv").Index().Any()).Params(jen.Any(), jen.Error()).Block(
		jen.List(jen.Id("v"), jen.Err()).Op(":=").Id("send").Call(jen.Id("ctx"), jen.Id("c"), jen.Id("argv")).Dot("Result").Call(),
		jen.If(jen.Id("IsNoScript").Call(jen.Err())).Block(
			jen.Id("e").Op(":=").Qual("slices", "Clone").Call(jen.Id("argv")),
			jen.List(jen.Id("e").Index(jen.Lit(0)), jen.Id("e").Index(jen.Lit(1))).Op("=").List(jen.Lit("eval"), jen.Id("src")),
			jen.List(jen.Id("v"), jen.Err()).Op("=").Id("send").Call(jen.Id("ctx"), jen.Id("c"), jen.Id("e")).Dot("Result").Call(),
		),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Qual("fmt", "Errorf").Call(jen.Lit("luascripts: %s: %w"), jen.Id("name"), jen.Err()))),
		jen.Return(jen.Id("v"), jen.Nil()),
	)
	f.Comment(cmt("processor is how go-redis's own EvalSha and Eval send the command they build: Process runs the client's hooks and sends it, or queues it on a pipeline."))
	f.Type().Id("processor").Interface(
		jen.Id("Process").Params(jen.Qual("context", "Context"), jen.Qual(goRedisPkg, "Cmder")).Error(),
	)
	f.Comment(cmt("send sends (or, on a pipeline, queues) argv, a script call's whole command in wire order (\"evalsha\" or \"eval\", the SHA1 or the source, the number of keys as an int, KEYS, ARGV), as the *redis.Cmd that go-redis's EvalSha or Eval would build for the same call: the same arguments of the same types in the same order, its first key at 3, handed to the same Process, and NOSCRIPT reported as redis.ErrNoScript. Why not call them: they take KEYS and ARGV as two lists, which a caller allocates only for them to copy into the command's own, and they box the command's name and payload, which they get as variables: four allocations a call that the one list built here, with its constant name and payload, does without. Only go-redis's own clients, whose EvalSha and Eval are exactly that (their cmdable is Process), get the command built here; any other Scripter, such as a wrapper that overrides EvalSha, gets its own EvalSha or Eval with the keys unboxed again. (go-redis's AutoPipeliner is left to its own: its EvalSha reads an error only once the batch has run.)"))
	f.Func().Id("send").Params(ctxP.Clone(), scripterP.Clone(), jen.Id("argv").Index().Any()).Op("*").Qual(goRedisPkg, "Cmd").Block(
		jen.List(jen.Id("n"), jen.Id("_")).Op(":=").Id("argv").Index(jen.Lit(2)).Assert(jen.Int()),
		jen.Switch(jen.Id("c").Assert(jen.Type())).Block(
			jen.Case(jen.Op("*").Qual(goRedisPkg, "Client"), jen.Op("*").Qual(goRedisPkg, "ClusterClient"), jen.Op("*").Qual(goRedisPkg, "Ring"), jen.Op("*").Qual(goRedisPkg, "Conn"), jen.Op("*").Qual(goRedisPkg, "Tx"), jen.Op("*").Qual(goRedisPkg, "Pipeline")).Block(
				jen.Id("cmd").Op(":=").Qual(goRedisPkg, "NewCmd").Call(jen.Id("ctx"), jen.Id("argv").Op("...")),
				jen.If(jen.Id("n").Op(">").Lit(0)).Block(jen.Id("cmd").Dot("SetFirstKeyPos").Call(jen.Lit(3))),
				jen.Id("_").Op("=").Id("c").Assert(jen.Id("processor")).Dot("Process").Call(jen.Id("ctx"), jen.Id("cmd")),
				jen.If(jen.Err().Op(":=").Id("cmd").Dot("Err").Call(), jen.Err().Op("!=").Nil().Op("&&").Qual(goRedisPkg, "HasErrorPrefix").Call(jen.Err(), jen.Lit("NOSCRIPT"))).Block(
					jen.Id("cmd").Dot("SetErr").Call(jen.Qual(goRedisPkg, "ErrNoScript")),
				),
				jen.Return(jen.Id("cmd")),
			),
		),
		jen.List(jen.Id("keys"), jen.Id("args")).Op(":=").Id("split").Call(jen.Id("argv")),
		jen.List(jen.Id("payload"), jen.Id("_")).Op(":=").Id("argv").Index(jen.Lit(1)).Assert(jen.String()),
		jen.If(jen.Id("argv").Index(jen.Lit(0)).Op("==").Lit("eval")).Block(
			jen.Return(jen.Id("c").Dot("Eval").Call(jen.Id("ctx"), jen.Id("payload"), jen.Id("keys"), jen.Id("args").Op("..."))),
		),
		jen.Return(jen.Id("c").Dot("EvalSha").Call(jen.Id("ctx"), jen.Id("payload"), jen.Id("keys"), jen.Id("args").Op("..."))),
	)
	f.Comment(cmt("split returns the KEYS and ARGV of argv, a script call's whole command."))
	f.Func().Id("split").Params(jen.Id("argv").Index().Any()).Params(jen.Index().String(), jen.Index().Any()).Block(
		jen.List(jen.Id("n"), jen.Id("_")).Op(":=").Id("argv").Index(jen.Lit(2)).Assert(jen.Int()),
		jen.Id("keys").Op(":=").Make(jen.Index().String(), jen.Id("n")),
		jen.For(jen.Id("i").Op(":=").Range().Id("keys")).Block(
			jen.List(jen.Id("keys").Index(jen.Id("i")), jen.Id("_")).Op("=").Id("argv").Index(jen.Lit(3).Op("+").Id("i")).Assert(jen.String()),
		),
		jen.Return(jen.Id("keys"), jen.Id("argv").Index(jen.Lit(3).Op("+").Id("n").Op(":"))),
	)
	f.Func().Id("errCmd").Params(jen.Id("ctx").Qual("context", "Context"), jen.Err().Error()).Op("*").Qual(goRedisPkg, "Cmd").Block(
		jen.Id("cmd").Op(":=").Qual(goRedisPkg, "NewCmd").Call(jen.Id("ctx")),
		jen.Id("cmd").Dot("SetErr").Call(jen.Err()),
		jen.Return(jen.Id("cmd")),
	)
	f.Func().Id("lenErr").Params(jen.List(jen.Id("script"), jen.Id("arg")).String(), jen.Id("n").Int(), jen.Id("keys").String(), jen.Id("m").Int()).Error().Block(
		jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: %s: %d %s for %d %s"), jen.Id("ErrArgs"), jen.Id("script"), jen.Id("n"), jen.Id("arg"), jen.Id("m"), jen.Id("keys"))),
	)
	f.Func().Id("replyErr").Params(jen.List(jen.Id("script"), jen.Id("field")).String(), jen.Id("v").Any(), jen.Id("want").String()).Error().Block(
		jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: %s: %s is %T, want %s"), jen.Id("ErrReply"), jen.Id("script"), jen.Id("field"), jen.Id("v"), jen.Id("want"))),
	)
	f.Func().Id("replyArray").Params(jen.Id("v").Any(), jen.List(jen.Id("script"), jen.Id("field")).String(), jen.Id("n").Int()).Params(jen.Index().Any(), jen.Error()).Block(
		jen.List(jen.Id("l"), jen.Id("ok")).Op(":=").Id("v").Assert(jen.Index().Any()),
		jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.Nil(), jen.Id("replyErr").Call(jen.Id("script"), jen.Id("field"), jen.Id("v"), jen.Lit("an array")))),
		jen.If(jen.Id("n").Op(">=").Lit(0).Op("&&").Len(jen.Id("l")).Op("!=").Id("n")).Block(
			jen.Return(jen.Nil(), jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: %s: %s has %d elements, want %d"), jen.Id("ErrReply"), jen.Id("script"), jen.Id("field"), jen.Len(jen.Id("l")), jen.Id("n"))),
		),
		jen.Return(jen.Id("l"), jen.Nil()),
	)

	// Which decoders are needed.
	used := map[string]bool{}
	for _, sc := range s.Scripts {
		for _, r := range sc.Reply {
			used[r.Type] = true
		}
	}
	for _, r := range s.Records {
		if used["[]"+r.Name] {
			for _, fl := range r.Fields {
				used[fl.Type] = true
			}
		}
	}
	if used["[][]string"] {
		used["[]string"] = true
	}
	if used["[]string"] {
		used["string"] = true
	}
	if used["[]int64"] {
		used["int64"] = true
	}
	if used["int64"] {
		f.Func().Id("replyInt64").Params(jen.Id("v").Any(), jen.List(jen.Id("script"), jen.Id("field")).String()).Params(jen.Int64(), jen.Error()).Block(
			jen.List(jen.Id("n"), jen.Id("ok")).Op(":=").Id("v").Assert(jen.Int64()),
			jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.Lit(0), jen.Id("replyErr").Call(jen.Id("script"), jen.Id("field"), jen.Id("v"), jen.Lit("an integer")))),
			jen.Return(jen.Id("n"), jen.Nil()),
		)
	}
	if used["string"] {
		f.Func().Id("replyString").Params(jen.Id("v").Any(), jen.List(jen.Id("script"), jen.Id("field")).String()).Params(jen.String(), jen.Error()).Block(
			jen.List(jen.Id("s"), jen.Id("ok")).Op(":=").Id("v").Assert(jen.String()),
			jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.Lit(""), jen.Id("replyErr").Call(jen.Id("script"), jen.Id("field"), jen.Id("v"), jen.Lit("a string")))),
			jen.Return(jen.Id("s"), jen.Nil()),
		)
	}
	listOf := func(name string, elem jen.Code, dec string) {
		f.Func().Id(name).Params(jen.Id("v").Any(), jen.List(jen.Id("script"), jen.Id("field")).String()).Params(jen.Index().Add(elem), jen.Error()).Block(
			jen.List(jen.Id("l"), jen.Err()).Op(":=").Id("replyArray").Call(jen.Id("v"), jen.Id("script"), jen.Id("field"), jen.Lit(-1)),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Id("out").Op(":=").Make(jen.Index().Add(elem), jen.Len(jen.Id("l"))),
			jen.For(jen.List(jen.Id("i"), jen.Id("e")).Op(":=").Range().Id("l")).Block(
				jen.If(jen.List(jen.Id("out").Index(jen.Id("i")), jen.Err()).Op("=").Id(dec).Call(jen.Id("e"), jen.Id("script"), jen.Id("field")), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			),
			jen.Return(jen.Id("out"), jen.Nil()),
		)
	}
	if used["[]string"] {
		listOf("replyStrings", jen.String(), "replyString")
	}
	if used["[]int64"] {
		listOf("replyInt64s", jen.Int64(), "replyInt64")
	}
	if used["[][]string"] {
		listOf("replyStringLists", jen.Index().String(), "replyStrings")
	}
	for _, r := range s.Records {
		t := camel(r.Name)
		var fields []jen.Code
		for _, fl := range r.Fields {
			c := jen.Id(camel(fl.Name)).Add(goType(fl.Type))
			if fl.Doc != "" {
				c.Comment(doc(fl.Doc))
			}
			fields = append(fields, c)
		}
		f.Comment(cmt(fmt.Sprintf("%s is %s.", t, doc(r.Doc))))
		f.Type().Id(t).Struct(fields...)
		if !used["[]"+r.Name] {
			continue
		}
		body := []jen.Code{
			jen.Var().Id("r").Id(t),
			jen.List(jen.Id("l"), jen.Err()).Op(":=").Id("replyArray").Call(jen.Id("v"), jen.Id("script"), jen.Id("field"), jen.Lit(len(r.Fields))),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("r"), jen.Err())),
		}
		for i, fl := range r.Fields {
			body = append(body, jen.If(jen.List(jen.Id("r").Dot(camel(fl.Name)), jen.Err()).Op("=").Id(decodeFunc(fl.Type)).Call(jen.Id("l").Index(jen.Lit(i)), jen.Id("script"), jen.Id("field").Op("+").Lit("."+fl.Name)), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("r"), jen.Err())))
		}
		body = append(body, jen.Return(jen.Id("r"), jen.Nil()))
		f.Func().Id("reply"+t).Params(jen.Id("v").Any(), jen.List(jen.Id("script"), jen.Id("field")).String()).Params(jen.Id(t), jen.Error()).Block(body...)
		listOf("reply"+t+"List", jen.Id(t), "reply"+t)
	}
	return renderGo("generated/luascripts/luascripts.go", f)
}

func (sc *RedisScript) genGo(keys map[string]*RedisKey) (File, error) {
	n := camel(sc.Name)
	f := jen.NewFilePathName(luascriptPkg, "luascripts")
	f.ImportName(goRedisPkg, "redis")
	sum := sha1.Sum([]byte(sc.lua))
	sha := hex.EncodeToString(sum[:])

	f.Comment(cmt(fmt.Sprintf("%sSource is the Lua source of the %s script, byte for byte the file lua/%s.lua; it is what Eval sends.", n, sc.Name, sc.Name)))
	f.Const().Id(n + "Source").Op("=").Op("`" + sc.lua + "`")
	f.Comment(cmt(fmt.Sprintf("%sSHA1 is the SHA1 of %sSource, the digest EVALSHA and SCRIPT LOAD use.", n, n)))
	f.Const().Id(n + "SHA1").Op("=").Lit(sha)

	// Keys.
	var kf []jen.Code
	for _, k := range sc.Keys {
		key := keys[k.Key]
		var d string
		if k.Caller {
			d = fmt.Sprintf("%s is the caller's own key, in the hash slot of the script's other keys.", camel(k.Name))
			if k.Doc != "" {
				d += " " + doc(k.Doc)
			}
			kf = append(kf, jen.Comment(cmt(d)), jen.Id(camel(k.Name)).String())
			continue
		}
		if k.List {
			d = fmt.Sprintf("%s are wire.%sKey(%s) of each %s.", camel(k.Name), camel(key.Name), key.param, key.param)
			if *sc.Cluster {
				d += " In Cluster mode they must all lie in one hash slot."
			}
		} else {
			d = fmt.Sprintf("%s is wire.%sKey(%s).", camel(k.Name), camel(key.Name), key.param)
		}
		if k.Doc != "" {
			d += " " + doc(k.Doc)
		}
		t := jen.String()
		if k.List {
			t = jen.Index().String()
		}
		kf = append(kf, jen.Comment(cmt(d)), jen.Id(camel(k.Name)).Add(t))
	}
	f.Comment(fmt.Sprintf("%sKeys are the KEYS of the %s script.", n, sc.Name))
	f.Type().Id(n + "Keys").Struct(kf...)

	// Args (count_of arguments are computed, not passed).
	var af []jen.Code
	for _, a := range sc.Args {
		if a.CountOf != "" {
			continue
		}
		d := fmt.Sprintf("%s is ARGV %s.", camel(a.Name), a.Name)
		if a.Doc != "" {
			d = fmt.Sprintf("%s is ARGV %s: %s.", camel(a.Name), a.Name, strings.TrimSuffix(doc(a.Doc), "."))
		}
		af = append(af, jen.Comment(cmt(d)), jen.Id(camel(a.Name)).Add(goType(a.Type)))
	}
	f.Comment(fmt.Sprintf("%sArgs are the ARGV of the %s script.", n, sc.Name))
	f.Type().Id(n + "Args").Struct(af...)

	var rf []jen.Code
	for _, r := range sc.Reply {
		d := fmt.Sprintf("%s is the reply's %s.", camel(r.Name), r.Name)
		if r.Doc != "" {
			d = fmt.Sprintf("%s is the reply's %s: %s.", camel(r.Name), r.Name, strings.TrimSuffix(doc(r.Doc), "."))
		}
		rf = append(rf, jen.Comment(cmt(d)))
		rf = append(rf, jen.Id(camel(r.Name)).Add(goType(r.Type)))
	}
	f.Comment(fmt.Sprintf("%sReply is the decoded reply of the %s script.", n, sc.Name))
	f.Type().Id(n + "Reply").Struct(rf...)

	slot := "Standalone only: its keys span several hash slots."
	if *sc.Cluster {
		slot = "Every key of one call lies in one hash slot, so it is safe under routeBySlot (Redis Cluster) and on standalone Redis."
	}
	f.Comment(cmt(fmt.Sprintf("%sScript is the %s script. %s %s", n, sc.Name, sentence(sc.Doc), slot)))
	f.Type().Id(n + "Script").Struct()
	f.Comment(fmt.Sprintf("%s is the %s script.", n, sc.Name))
	f.Var().Id(n).Id(n + "Script")

	f.Comment("Info returns the script's name, source and SHA1.")
	f.Func().Params(jen.Id(n + "Script")).Id("Info").Params().Id("Info").Block(
		jen.Return(jen.Id("Info").Values(jen.Dict{jen.Id("Name"): jen.Lit(sc.Name), jen.Id("Source"): jen.Id(n + "Source"), jen.Id("SHA1"): jen.Id(n + "SHA1"), jen.Id("Cluster"): jen.Lit(*sc.Cluster)})),
	)

	// argv: the whole command in wire order, in one list; Build, Run, EvalSha and Eval use it.
	var build []jen.Code
	single := 0
	var listKeys []string
	for _, k := range sc.Keys {
		if k.List {
			listKeys = append(listKeys, camel(k.Name))
		} else {
			single++
		}
	}
	for _, a := range sc.Args {
		if a.LenOf != "" {
			build = append(build, jen.If(jen.Len(jen.Id("args").Dot(camel(a.Name))).Op("!=").Len(jen.Id("keys").Dot(camel(a.LenOf)))).Block(
				jen.Return(jen.Nil(), jen.Id("lenErr").Call(jen.Lit(sc.Name), jen.Lit(a.Name), jen.Len(jen.Id("args").Dot(camel(a.Name))), jen.Lit(a.LenOf), jen.Len(jen.Id("keys").Dot(camel(a.LenOf))))),
			))
		}
	}
	// nk, the number of keys: a constant unless the script has list keys.
	nk := jen.Lit(single)
	if len(listKeys) > 0 {
		var sum *jen.Statement
		if single > 0 {
			sum = jen.Lit(single)
		}
		for _, l := range listKeys {
			if sum == nil {
				sum = jen.Len(jen.Id("keys").Dot(l))
			} else {
				sum = sum.Op("+").Len(jen.Id("keys").Dot(l))
			}
		}
		build = append(build, jen.Id("nk").Op(":=").Add(sum))
		nk = jen.Id("nk")
	}
	// Scalars in wire order: the command, its payload, the key count, the single keys, then
	// (after the list keys) the single arguments, counts included.
	head := []jen.Code{jen.Id("cmd"), jen.Id("payload"), nk}
	for _, k := range sc.Keys {
		if !k.List {
			head = append(head, jen.Id("keys").Dot(camel(k.Name)))
		}
	}
	var scalars []jen.Code
	for _, a := range sc.Args {
		switch {
		case a.CountOf != "":
			scalars = append(scalars, jen.Int64().Call(jen.Len(jen.Id("keys").Dot(camel(a.CountOf)))))
		case !strings.HasPrefix(a.Type, "[]"):
			scalars = append(scalars, jen.Id("args").Dot(camel(a.Name)))
		}
	}
	size := jen.Lit(3 + single + len(scalars))
	if len(listKeys) > 0 {
		size = jen.Lit(3 + len(scalars)).Op("+").Id("nk")
	}
	for _, a := range sc.Args {
		if strings.HasPrefix(a.Type, "[]") {
			size = size.Op("+").Len(jen.Id("args").Dot(camel(a.Name)))
		}
	}
	build = append(build,
		jen.Id("a").Op(":=").Make(jen.Index().Any(), jen.Lit(0), size),
		jen.Id("a").Op("=").Append(append([]jen.Code{jen.Id("a")}, head...)...),
	)
	for _, l := range listKeys {
		build = append(build, jen.For(jen.List(jen.Id("_"), jen.Id("k")).Op(":=").Range().Id("keys").Dot(l)).Block(
			jen.Id("a").Op("=").Append(jen.Id("a"), jen.Id("k")),
		))
	}
	if len(scalars) > 0 {
		build = append(build, jen.Id("a").Op("=").Append(append([]jen.Code{jen.Id("a")}, scalars...)...))
	}
	for _, a := range sc.Args {
		if strings.HasPrefix(a.Type, "[]") {
			build = append(build, jen.For(jen.List(jen.Id("_"), jen.Id("v")).Op(":=").Range().Id("args").Dot(camel(a.Name))).Block(
				jen.Id("a").Op("=").Append(jen.Id("a"), jen.Id("v")),
			))
		}
	}
	build = append(build, jen.Return(jen.Id("a"), jen.Nil()))
	f.Comment(cmt("argv returns the script call's whole command in wire order, in one list sized once: cmd and payload (\"evalsha\" and the SHA1 or \"eval\" and the source, constants, which box without allocating), the number of keys (an int, as go-redis sends it), KEYS, then ARGV. It fails, matching ErrArgs, if a list argument's length differs from its list key's."))
	f.Func().Params(jen.Id(n+"Script")).Id("argv").Params(jen.List(jen.Id("cmd"), jen.Id("payload")).Any(), jen.Id("keys").Id(n+"Keys"), jen.Id("args").Id(n+"Args")).Params(jen.Index().Any(), jen.Error()).Block(build...)

	f.Comment(cmt("Build returns KEYS and ARGV in wire order. It fails, matching ErrArgs, if a list argument's length differs from its list key's."))
	f.Func().Params(jen.Id("s").Id(n+"Script")).Id("Build").Params(jen.Id("keys").Id(n+"Keys"), jen.Id("args").Id(n+"Args")).Params(jen.Index().String(), jen.Index().Any(), jen.Error()).Block(
		jen.List(jen.Id("a"), jen.Err()).Op(":=").Id("s").Dot("argv").Call(jen.Nil(), jen.Nil(), jen.Id("keys"), jen.Id("args")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Nil(), jen.Err())),
		jen.List(jen.Id("k"), jen.Id("v")).Op(":=").Id("split").Call(jen.Id("a")),
		jen.Return(jen.Id("k"), jen.Id("v"), jen.Nil()),
	)

	ctx := jen.Id("ctx").Qual("context", "Context")
	scripter := jen.Id("c").Qual(goRedisPkg, "Scripter")
	f.Comment(cmt("Run runs the script with EVALSHA, falling back to EVAL (which caches it) on NOSCRIPT, and decodes the reply. Errors from Redis are wrapped and remain errors.Is-testable."))
	f.Func().Params(jen.Id("s").Id(n+"Script")).Id("Run").Params(ctx, scripter, jen.Id("keys").Id(n+"Keys"), jen.Id("args").Id(n+"Args")).Params(jen.Id(n+"Reply"), jen.Error()).Block(
		jen.List(jen.Id("a"), jen.Err()).Op(":=").Id("s").Dot("argv").Call(jen.Lit("evalsha"), jen.Id(n+"SHA1"), jen.Id("keys"), jen.Id("args")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id(n+"Reply").Values(), jen.Err())),
		jen.List(jen.Id("v"), jen.Err()).Op(":=").Id("run").Call(jen.Id("ctx"), jen.Id("c"), jen.Lit(sc.Name), jen.Id(n+"Source"), jen.Id("a")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id(n+"Reply").Values(), jen.Err())),
		jen.Return(jen.Id("s").Dot("Decode").Call(jen.Id("v"))),
	)
	for _, m := range []struct{ name, call, what string }{
		{"EvalSha", "evalsha", "EVALSHA alone (no fallback), for pipelines: on NOSCRIPT (IsNoScript) resend with Eval or\nload the scripts (LoadAll) and retry. Decode the reply with Decode(cmd.Val())."},
		{"Eval", "eval", "EVAL with the full source, which also caches the script; for pipelines after NOSCRIPT."},
	} {
		payload := jen.Id(n + "SHA1")
		if m.call == "eval" {
			payload = jen.Id(n + "Source")
		}
		f.Comment(cmt(m.name + " sends (or, on a pipeline, queues) " + m.what))
		f.Func().Params(jen.Id("s").Id(n+"Script")).Id(m.name).Params(ctx, scripter, jen.Id("keys").Id(n+"Keys"), jen.Id("args").Id(n+"Args")).Op("*").Qual(goRedisPkg, "Cmd").Block(
			jen.List(jen.Id("a"), jen.Err()).Op(":=").Id("s").Dot("argv").Call(jen.Lit(m.call), payload, jen.Id("keys"), jen.Id("args")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("errCmd").Call(jen.Id("ctx"), jen.Err()))),
			jen.Return(jen.Id("send").Call(jen.Id("ctx"), jen.Id("c"), jen.Id("a"))),
		)
	}

	dec := []jen.Code{
		jen.Var().Id("r").Id(n + "Reply"),
		jen.List(jen.Id("l"), jen.Err()).Op(":=").Id("replyArray").Call(jen.Id("v"), jen.Lit(sc.Name), jen.Lit("reply"), jen.Lit(len(sc.Reply))),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("r"), jen.Err())),
	}
	for i, r := range sc.Reply {
		dec = append(dec, jen.If(jen.List(jen.Id("r").Dot(camel(r.Name)), jen.Err()).Op("=").Id(decodeFunc(r.Type)).Call(jen.Id("l").Index(jen.Lit(i)), jen.Lit(sc.Name), jen.Lit(r.Name)), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("r"), jen.Err())))
	}
	dec = append(dec, jen.Return(jen.Id("r"), jen.Nil()))
	f.Comment(cmt("Decode decodes a reply of the script (the value of its *redis.Cmd). It fails, matching ErrReply, on a reply of another shape."))
	f.Func().Params(jen.Id(n+"Script")).Id("Decode").Params(jen.Id("v").Any()).Params(jen.Id(n+"Reply"), jen.Error()).Block(dec...)
	return renderGo("generated/luascripts/"+sc.Name+"_script.go", f)
}
