package gen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// wirePkg is the import path of the generated wire package.
const wirePkg = "github.com/simba-go/simba/generated/wire"

// NamesSpec is spec/names.yaml.
type NamesSpec struct {
	Name struct {
		MinLength     int      `yaml:"min_length"`
		MaxLength     int      `yaml:"max_length"`
		Alphabet      []string `yaml:"alphabet"`
		Reserved      []string `yaml:"reserved"`
		CaseSensitive bool     `yaml:"case_sensitive"`
	} `yaml:"name"`
	Partition struct {
		Separator     string `yaml:"separator"`
		MaxPartitions int    `yaml:"max_partitions"`
	} `yaml:"partition"`
	Owner struct {
		MaxBytes int `yaml:"max_bytes"`
		// RefusedCategories are the Unicode general categories no owner character may have.
		RefusedCategories []string `yaml:"refused_categories"`
	} `yaml:"owner"`
	SessionID struct {
		ClientHexDigits    int `yaml:"client_hex_digits"`
		ZooKeeperHexDigits int `yaml:"zookeeper_hex_digits"`
	} `yaml:"session_id"`
	// ProbeGroup is the group whose members a client reads to probe its backend.
	ProbeGroup string `yaml:"probe_group"`
}

const namesFile = "names.yaml"

// LoadNames loads and validates spec/names.yaml and returns it with the allowed byte set.
func LoadNames(specDir string) (*NamesSpec, [256]bool, error) {
	var s NamesSpec
	var allowed [256]bool
	if err := loadYAML(specDir, namesFile, &s); err != nil {
		return nil, allowed, err
	}
	n := s.Name
	if n.MinLength < 1 {
		return nil, allowed, specErr(namesFile, "name.min_length", "must be at least 1, got %d", n.MinLength)
	}
	if n.MaxLength < n.MinLength || n.MaxLength > 255 {
		return nil, allowed, specErr(namesFile, "name.max_length", "must be in [min_length, 255], got %d", n.MaxLength)
	}
	if !n.CaseSensitive {
		return nil, allowed, specErr(namesFile, "name.case_sensitive", "must be true: every backend compares names bytewise")
	}
	if len(n.Alphabet) == 0 {
		return nil, allowed, specErr(namesFile, "name.alphabet", "is empty")
	}
	for i, r := range n.Alphabet {
		field := fmt.Sprintf("name.alphabet[%d]", i)
		switch {
		case len(r) == 1:
			allowed[r[0]] = true
		case len(r) == 3 && r[1] == '-' && r[0] < r[2]:
			for c := int(r[0]); c <= int(r[2]); c++ {
				allowed[c] = true
			}
		default:
			return nil, allowed, specErr(namesFile, field, "%q is neither one character nor a range like \"a-z\"", r)
		}
	}
	for c := 0; c < 256; c++ {
		if allowed[c] && (c < 0x21 || c > 0x7e) {
			return nil, allowed, specErr(namesFile, "name.alphabet", "character %#x is not printable ASCII", c)
		}
		if allowed[c] && (c == '/' || c == '{' || c == '}') {
			return nil, allowed, specErr(namesFile, "name.alphabet", "%q cannot be allowed: it breaks ZooKeeper paths or Redis hash tags", rune(c))
		}
	}
	for i, r := range n.Reserved {
		if r == "" {
			return nil, allowed, specErr(namesFile, fmt.Sprintf("name.reserved[%d]", i), "is empty")
		}
	}
	p := s.Partition
	if len(p.Separator) != 1 || !allowed[p.Separator[0]] {
		return nil, allowed, specErr(namesFile, "partition.separator", "must be one character of the alphabet, got %q", p.Separator)
	}
	if p.MaxPartitions < 1 {
		return nil, allowed, specErr(namesFile, "partition.max_partitions", "must be positive, got %d", p.MaxPartitions)
	}
	for _, c := range "0123456789" {
		if !allowed[c] {
			return nil, allowed, specErr(namesFile, "name.alphabet", "must contain the digits: partition names end in a decimal number")
		}
	}
	if s.Owner.MaxBytes < 1 || s.Owner.MaxBytes > 65535 {
		return nil, allowed, specErr(namesFile, "owner.max_bytes", "must be in [1, 65535], got %d", s.Owner.MaxBytes)
	}
	if len(s.Owner.RefusedCategories) == 0 {
		return nil, allowed, specErr(namesFile, "owner.refused_categories", "is empty: an owner must at least refuse control characters (Cc)")
	}
	seen := map[string]bool{}
	for i, c := range s.Owner.RefusedCategories {
		field := fmt.Sprintf("owner.refused_categories[%d]", i)
		if ownerCategoryWords[c] == "" {
			return nil, allowed, specErr(namesFile, field, "%q is not one of the categories an owner may refuse (Cc, Cf, Co, Zl, Zp)", c)
		}
		if seen[c] {
			return nil, allowed, specErr(namesFile, field, "%q is listed twice", c)
		}
		seen[c] = true
	}
	if !seen["Cc"] {
		return nil, allowed, specErr(namesFile, "owner.refused_categories", "must contain Cc: a control character in an owner reaches terminals, logs and drivers")
	}
	if d := s.SessionID.ClientHexDigits; d < 16 || d > 64 || d%2 != 0 {
		return nil, allowed, specErr(namesFile, "session_id.client_hex_digits", "must be an even number in [16, 64], got %d", d)
	}
	if d := s.SessionID.ZooKeeperHexDigits; d != 16 {
		return nil, allowed, specErr(namesFile, "session_id.zookeeper_hex_digits", "must be 16 (a ZooKeeper session id has 64 bits), got %d", d)
	}
	if err := checkName(s.ProbeGroup, n.MaxLength, allowed, n.Reserved); err != "" {
		return nil, allowed, specErr(namesFile, "probe_group", "%s", err)
	}
	return &s, allowed, nil
}

// checkName checks a name the spec itself fixes against the grammar ("" if it is valid).
func checkName(name string, maxLength int, allowed [256]bool, reserved []string) string {
	if name == "" || len(name) > maxLength {
		return fmt.Sprintf("must be 1 to %d bytes, got %q", maxLength, name)
	}
	for i := 0; i < len(name); i++ {
		if !allowed[name[i]] {
			return fmt.Sprintf("%q: byte %d (%q) is not in the alphabet", name, i, name[i])
		}
	}
	for _, r := range reserved {
		if name == r {
			return fmt.Sprintf("%q is reserved", name)
		}
	}
	return ""
}

func genNames(specDir string) ([]File, error) {
	s, allowed, err := LoadNames(specDir)
	if err != nil {
		return nil, err
	}
	f := jen.NewFilePathName(wirePkg, "wire")
	f.PackageComment("Package wire holds Simba's frozen wire rules as Go: name validation, partition names,\n" +
		"rendezvous assignment weights, Redis key and ZooKeeper path builders, and the constants every\n" +
		"backend shares. Everything here is generated from spec/ by simbagen; never edit it by hand.")

	f.Comment("Name length bounds, in bytes (every allowed character is one byte).")
	f.Const().Defs(
		jen.Id("MinNameLen").Op("=").Lit(s.Name.MinLength),
		jen.Id("MaxNameLen").Op("=").Lit(s.Name.MaxLength),
	)
	f.Comment("PartitionSeparator joins a group name and a partition number into a lease name.")
	f.Const().Id("PartitionSeparator").Op("=").Lit(s.Partition.Separator)
	f.Comment("MaxPartitions bounds the partition count of one group.")
	f.Const().Id("MaxPartitions").Op("=").Lit(s.Partition.MaxPartitions)
	f.Comment("ProbeGroup is the group whose members a client reads to probe its backend after a failure:")
	f.Comment("no member joins it. A backend need not watch it for changes (its hints serve members).")
	f.Const().Id("ProbeGroup").Op("=").Lit(s.ProbeGroup)

	var chars strings.Builder
	var lits []jen.Code
	for c := 0; c < 256; c++ {
		if allowed[c] {
			chars.WriteByte(byte(c))
			lits = append(lits, jen.Lit(c).Op(":").True())
		}
	}
	f.Comment("NameAlphabet lists every character a name may contain.")
	f.Const().Id("NameAlphabet").Op("=").Lit(chars.String())
	f.Var().Id("nameByte").Op("=").Index(jen.Lit(256)).Bool().Values(lits...)

	var reserved []jen.Code
	for _, r := range s.Name.Reserved {
		reserved = append(reserved, jen.Lit(r).Op(":").True())
	}
	f.Var().Id("reservedNames").Op("=").Map(jen.String()).Bool().Values(reserved...)

	f.Comment("ErrInvalidName is matched (errors.Is) by every error ValidateName returns.")
	f.Var().Id("ErrInvalidName").Op("=").Qual("errors", "New").Call(jen.Lit("simba: invalid name"))

	f.Comment("NameError says why a name is invalid. errors.Is(err, ErrInvalidName) holds for it.")
	f.Type().Id("NameError").Struct(
		jen.Id("Name").String().Comment("the offending name (truncated to 160 bytes)"),
		jen.Id("Reason").String(),
	)
	f.Comment("Error implements error.")
	f.Func().Params(jen.Id("e").Op("*").Id("NameError")).Id("Error").Params().String().Block(
		jen.Return(jen.Qual("fmt", "Sprintf").Call(jen.Lit("simba: invalid name %q: %s"), jen.Id("e").Dot("Name"), jen.Id("e").Dot("Reason"))),
	)
	f.Comment("Is makes errors.Is(err, ErrInvalidName) hold.")
	f.Func().Params(jen.Id("e").Op("*").Id("NameError")).Id("Is").Params(jen.Id("target").Error()).Bool().Block(
		jen.Return(jen.Id("target").Op("==").Id("ErrInvalidName")),
	)

	f.Func().Id("nameErr").Params(jen.Id("name"), jen.Id("reason").String()).Error().Block(
		jen.If(jen.Len(jen.Id("name")).Op(">").Lit(160)).Block(jen.Id("name").Op("=").Id("name").Index(jen.Empty(), jen.Lit(160))),
		jen.Return(jen.Op("&").Id("NameError").Values(jen.Dict{jen.Id("Name"): jen.Id("name"), jen.Id("Reason"): jen.Id("reason")})),
	)

	f.Comment(fmt.Sprintf("ValidateName checks a lease name against the wire grammar: %d to %d characters of\n[%s], not one of the reserved names. Names are case-sensitive on every backend.",
		s.Name.MinLength, s.Name.MaxLength, strings.Join(s.Name.Alphabet, "")))
	f.Func().Id("ValidateName").Params(jen.Id("name").String()).Error().Block(
		jen.If(jen.Len(jen.Id("name")).Op("<").Id("MinNameLen")).Block(
			jen.Return(jen.Id("nameErr").Call(jen.Id("name"), jen.Lit(tooShort(s.Name.MinLength)))),
		),
		jen.If(jen.Len(jen.Id("name")).Op(">").Id("MaxNameLen")).Block(
			jen.Return(jen.Id("nameErr").Call(jen.Id("name"), jen.Qual("fmt", "Sprintf").Call(jen.Lit(fmt.Sprintf("%%d bytes, longer than %d", s.Name.MaxLength)), jen.Len(jen.Id("name"))))),
		),
		jen.For(jen.Id("i").Op(":=").Lit(0), jen.Id("i").Op("<").Len(jen.Id("name")), jen.Id("i").Op("++")).Block(
			jen.If(jen.Op("!").Id("nameByte").Index(jen.Id("name").Index(jen.Id("i")))).Block(
				jen.Return(jen.Id("nameErr").Call(jen.Id("name"), jen.Qual("fmt", "Sprintf").Call(jen.Lit("byte %d (%#x) is not one of "+chars.String()), jen.Id("i"), jen.Id("name").Index(jen.Id("i"))))),
			),
		),
		jen.If(jen.Id("reservedNames").Index(jen.Id("name"))).Block(
			jen.Return(jen.Id("nameErr").Call(jen.Id("name"), jen.Lit("reserved name"))),
		),
		jen.Return(jen.Nil()),
	)

	maxDigits := len(strconv.Itoa(s.Partition.MaxPartitions - 1))
	f.Comment("PartitionName is the lease name of partition p of group: \"<group>" + s.Partition.Separator + "<p>\".")
	f.Func().Id("PartitionName").Params(jen.Id("group").String(), jen.Id("p").Int()).String().Block(
		jen.Return(jen.Id("group").Op("+").Id("PartitionSeparator").Op("+").Qual("strconv", "Itoa").Call(jen.Id("p"))),
	)

	f.Comment("ValidateGroup checks that group is a valid name and that every partition name of a group\nof that many partitions is valid too.")
	f.Func().Id("ValidateGroup").Params(jen.Id("group").String(), jen.Id("partitions").Int()).Error().Block(
		jen.If(jen.Err().Op(":=").Id("ValidateName").Call(jen.Id("group")), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
		jen.If(jen.Id("partitions").Op("<").Lit(1).Op("||").Id("partitions").Op(">").Id("MaxPartitions")).Block(
			jen.Return(jen.Id("nameErr").Call(jen.Id("group"), jen.Qual("fmt", "Sprintf").Call(jen.Lit("partition count %d is outside [1, %d]"), jen.Id("partitions"), jen.Id("MaxPartitions")))),
		),
		jen.Return(jen.Id("ValidateName").Call(jen.Id("PartitionName").Call(jen.Id("group"), jen.Id("partitions").Op("-").Lit(1)))),
	)

	f.Comment("ParsePartition splits a partition lease name into its group and partition number. It\nreports false for names that are not of the form \"<group>" + s.Partition.Separator + "<p>\" with p in canonical decimal.")
	f.Func().Id("ParsePartition").Params(jen.Id("name").String()).Params(jen.Id("group").String(), jen.Id("p").Int(), jen.Id("ok").Bool()).Block(
		jen.Id("i").Op(":=").Qual("strings", "LastIndex").Call(jen.Id("name"), jen.Id("PartitionSeparator")),
		jen.Id("digits").Op(":=").Id("name").Index(jen.Id("i").Op("+").Lit(1), jen.Empty()),
		jen.If(jen.Id("i").Op("<=").Lit(0).Op("||").Len(jen.Id("digits")).Op("==").Lit(0).Op("||").Len(jen.Id("digits")).Op(">").Lit(maxDigits).Op("||").
			Parens(jen.Len(jen.Id("digits")).Op(">").Lit(1).Op("&&").Id("digits").Index(jen.Lit(0)).Op("==").LitRune('0'))).Block(
			jen.Return(jen.Lit(""), jen.Lit(0), jen.False()),
		),
		jen.For(jen.Id("j").Op(":=").Lit(0), jen.Id("j").Op("<").Len(jen.Id("digits")), jen.Id("j").Op("++")).Block(
			jen.Id("c").Op(":=").Id("digits").Index(jen.Id("j")),
			jen.If(jen.Id("c").Op("<").LitRune('0').Op("||").Id("c").Op(">").LitRune('9')).Block(jen.Return(jen.Lit(""), jen.Lit(0), jen.False())),
			jen.Id("p").Op("=").Id("p").Op("*").Lit(10).Op("+").Int().Parens(jen.Id("c").Op("-").LitRune('0')),
		),
		jen.If(jen.Id("p").Op(">=").Id("MaxPartitions")).Block(jen.Return(jen.Lit(""), jen.Lit(0), jen.False())),
		jen.Return(jen.Id("name").Index(jen.Empty(), jen.Id("i")), jen.Id("p"), jen.True()),
	)

	genOwner(f, s)
	genSessionIDs(f, s)

	file, err := renderGo("generated/wire/names.go", f)
	if err != nil {
		return nil, err
	}
	return []File{file}, nil
}

// ownerCategoryWords names, in error messages, the Unicode general categories that
// spec/names.yaml may refuse in an owner. Each is a table of package unicode whose membership
// is fixed for assigned characters (an unassigned category, Cn, would change with Go's Unicode
// version and so with the binary that reads the rule).
var ownerCategoryWords = map[string]string{
	"Cc": "control character",
	"Cf": "format character",
	"Co": "private-use character",
	"Zl": "line separator",
	"Zp": "paragraph separator",
}

// genOwner emits the owner-string rule: MaxOwnerLen, ErrInvalidOwner, OwnerRefuses and
// ValidateOwner.
func genOwner(f *jen.File, s *NamesSpec) {
	cats := s.Owner.RefusedCategories
	var listed []string
	var tables []jen.Code
	for _, c := range cats {
		listed = append(listed, fmt.Sprintf("%s (%ss)", c, ownerCategoryWords[c]))
		tables = append(tables, jen.Qual("unicode", c))
	}
	list := strings.Join(listed, ", ")
	if i := strings.LastIndex(list, ", "); i >= 0 {
		list = list[:i] + " or " + list[i+2:]
	}
	f.Comment("MaxOwnerLen bounds a session's owner string, in bytes.")
	f.Const().Id("MaxOwnerLen").Op("=").Lit(s.Owner.MaxBytes)
	f.Comment("ErrInvalidOwner is matched (errors.Is) by every error ValidateOwner returns.")
	f.Var().Id("ErrInvalidOwner").Op("=").Qual("errors", "New").Call(jen.Lit("simba: invalid owner"))
	f.Comment(wrap(fmt.Sprintf("OwnerRefuses reports whether r may not appear in an owner: it is of Unicode category %s. "+
		"Code that makes an owner from outside text (a host name) replaces these.", list)))
	f.Func().Id("OwnerRefuses").Params(jen.Id("r").Rune()).Bool().Block(
		jen.Return(jen.Qual("unicode", "In").Call(append([]jen.Code{jen.Id("r")}, tables...)...)),
	)
	f.Comment(wrap(fmt.Sprintf("ValidateOwner checks a session's owner string: 1 to %d bytes of valid UTF-8 without a "+
		"character OwnerRefuses, so an owner can never carry a terminal escape sequence or a NUL to a status tool, "+
		"a log or a driver, nor display as another owner. Its errors match ErrInvalidOwner, quote the owner "+
		"escaped and name the first offending character's byte offset and code point (or byte, for invalid UTF-8).",
		s.Owner.MaxBytes)))
	bad := func(format string, args ...jen.Code) jen.Code {
		return jen.Return(jen.Qual("fmt", "Errorf").Call(append([]jen.Code{jen.Lit("%w: " + format), jen.Id("ErrInvalidOwner")}, args...)...))
	}
	loop := []jen.Code{
		jen.List(jen.Id("r"), jen.Id("size")).Op(":=").Qual("unicode/utf8", "DecodeRuneInString").Call(jen.Id("owner").Index(jen.Id("i"), jen.Empty())),
		jen.If(jen.Id("r").Op("==").Qual("unicode/utf8", "RuneError").Op("&&").Id("size").Op("==").Lit(1)).Block(
			bad("%+q is not valid UTF-8: byte %d is %#02x", jen.Id("owner"), jen.Id("i"), jen.Id("owner").Index(jen.Id("i"))),
		),
	}
	for _, c := range cats {
		loop = append(loop, jen.If(jen.Qual("unicode", "Is").Call(jen.Qual("unicode", c), jen.Id("r"))).Block(
			bad(fmt.Sprintf("%%+q has a %s (%s %%U) at byte %%d", ownerCategoryWords[c], c), jen.Id("owner"), jen.Id("r"), jen.Id("i")),
		))
	}
	loop = append(loop, jen.Id("i").Op("+=").Id("size"))
	f.Func().Id("ValidateOwner").Params(jen.Id("owner").String()).Error().Block(
		jen.If(jen.Id("owner").Op("==").Lit("")).Block(bad("empty")),
		jen.If(jen.Len(jen.Id("owner")).Op(">").Id("MaxOwnerLen")).Block(bad(fmt.Sprintf("%%d bytes, longer than %d", s.Owner.MaxBytes), jen.Len(jen.Id("owner")))),
		jen.For(jen.Id("i").Op(":=").Lit(0), jen.Id("i").Op("<").Len(jen.Id("owner")), jen.Empty()).Block(loop...),
		jen.Return(jen.Nil()),
	)
}

// genSessionIDs emits the two session-id forms: IsClientSessionID and IsZooKeeperSessionID.
func genSessionIDs(f *jen.File, s *NamesSpec) {
	f.Comment("Session id lengths, in lowercase hex digits: ids that SQL and Redis clients make, and\nZooKeeper session ids.")
	f.Const().Defs(
		jen.Id("ClientSessionIDLen").Op("=").Lit(s.SessionID.ClientHexDigits),
		jen.Id("ZooKeeperSessionIDLen").Op("=").Lit(s.SessionID.ZooKeeperHexDigits),
	)
	f.Func().Id("isLowerHex").Params(jen.Id("s").String(), jen.Id("n").Int()).Bool().Block(
		jen.If(jen.Len(jen.Id("s")).Op("!=").Id("n")).Block(jen.Return(jen.False())),
		jen.For(jen.Id("i").Op(":=").Lit(0), jen.Id("i").Op("<").Len(jen.Id("s")), jen.Id("i").Op("++")).Block(
			jen.Id("c").Op(":=").Id("s").Index(jen.Id("i")),
			jen.If(jen.Parens(jen.Id("c").Op("<").LitRune('0').Op("||").Id("c").Op(">").LitRune('9')).Op("&&").
				Parens(jen.Id("c").Op("<").LitRune('a').Op("||").Id("c").Op(">").LitRune('f'))).Block(jen.Return(jen.False())),
		),
		jen.Return(jen.True()),
	)
	f.Comment(fmt.Sprintf("IsClientSessionID reports whether id has the form of a session id that SQL and Redis clients\n"+
		"make: %d lowercase hex digits. Anything else found where a session id belongs (a lease holder,\n"+
		"a group member) is a foreign record.", s.SessionID.ClientHexDigits))
	f.Func().Id("IsClientSessionID").Params(jen.Id("id").String()).Bool().Block(
		jen.Return(jen.Id("isLowerHex").Call(jen.Id("id"), jen.Id("ClientSessionIDLen"))),
	)
	f.Comment(fmt.Sprintf("IsZooKeeperSessionID reports whether id has the form of a ZooKeeper session id as Simba\n"+
		"writes it: %d lowercase hex digits.", s.SessionID.ZooKeeperHexDigits))
	f.Func().Id("IsZooKeeperSessionID").Params(jen.Id("id").String()).Bool().Block(
		jen.Return(jen.Id("isLowerHex").Call(jen.Id("id"), jen.Id("ZooKeeperSessionIDLen"))),
	)
}

// tooShort is the reason ValidateName gives for a name under minLength bytes: "empty" when
// the minimum is one ("shorter than 1 characters" read as a typo).
func tooShort(minLength int) string {
	if minLength == 1 {
		return "empty"
	}
	return fmt.Sprintf("shorter than %d bytes", minLength)
}
