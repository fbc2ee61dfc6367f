package gen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// AssignSpec is spec/assign.yaml: the rendezvous weight function and its vectors.
type AssignSpec struct {
	Input   string `yaml:"input"`
	FNV1a64 struct {
		Offset uint64 `yaml:"offset"`
		Prime  uint64 `yaml:"prime"`
	} `yaml:"fnv1a64"`
	SplitMix64 struct {
		Increment uint64 `yaml:"increment"`
		Steps     []struct {
			Shift      uint   `yaml:"shift"`
			Multiplier uint64 `yaml:"multiplier"`
		} `yaml:"steps"`
		FinalShift uint `yaml:"final_shift"`
	} `yaml:"splitmix64"`
	TieBreak      string `yaml:"tie_break"`
	WeightVectors []struct {
		Partition int    `yaml:"partition"`
		Member    string `yaml:"member"`
		Weight    uint64 `yaml:"weight"`
	} `yaml:"weight_vectors"`
	OwnerVectors []struct {
		Partition int      `yaml:"partition"`
		Members   []string `yaml:"members"`
		Owner     string   `yaml:"owner"`
	} `yaml:"owner_vectors"`
}

const assignFile = "assign.yaml"

// weight evaluates the spec's weight function, to check the vectors at generation time.
func (s *AssignSpec) weight(p int, member string) uint64 {
	in := strings.NewReplacer("<p>", strconv.Itoa(p), "<member>", member).Replace(s.Input)
	h := s.FNV1a64.Offset
	for i := 0; i < len(in); i++ {
		h ^= uint64(in[i])
		h *= s.FNV1a64.Prime
	}
	z := h + s.SplitMix64.Increment
	for _, st := range s.SplitMix64.Steps {
		z = (z ^ (z >> st.Shift)) * st.Multiplier
	}
	return z ^ (z >> s.SplitMix64.FinalShift)
}

func (s *AssignSpec) owner(p int, members []string) string {
	best, bestW := "", uint64(0)
	for i, m := range members {
		w := s.weight(p, m)
		if i == 0 || w > bestW || (w == bestW && m < best) {
			best, bestW = m, w
		}
	}
	return best
}

// LoadAssign loads and validates spec/assign.yaml, checking every vector.
func LoadAssign(specDir string) (*AssignSpec, error) {
	var s AssignSpec
	if err := loadYAML(specDir, assignFile, &s); err != nil {
		return nil, err
	}
	if s.Input != "<p>@<member>" {
		// The generated Go hashes the pieces without building the string; only this template is
		// implemented, and a change to it is a wire break anyway.
		return nil, specErr(assignFile, "input", "only the template \"<p>@<member>\" is supported, got %q", s.Input)
	}
	if s.FNV1a64.Offset == 0 || s.FNV1a64.Prime == 0 {
		return nil, specErr(assignFile, "fnv1a64", "offset and prime must be set")
	}
	if len(s.SplitMix64.Steps) == 0 {
		return nil, specErr(assignFile, "splitmix64.steps", "is empty")
	}
	for i, st := range s.SplitMix64.Steps {
		if st.Shift == 0 || st.Shift > 63 || st.Multiplier == 0 {
			return nil, specErr(assignFile, fmt.Sprintf("splitmix64.steps[%d]", i), "shift must be in [1, 63] and multiplier non-zero")
		}
	}
	if s.SplitMix64.FinalShift == 0 || s.SplitMix64.FinalShift > 63 {
		return nil, specErr(assignFile, "splitmix64.final_shift", "must be in [1, 63]")
	}
	if s.TieBreak != "smaller_member" {
		return nil, specErr(assignFile, "tie_break", "only smaller_member is supported, got %q", s.TieBreak)
	}
	if len(s.WeightVectors) < 3 {
		return nil, specErr(assignFile, "weight_vectors", "needs at least 3 vectors")
	}
	for i, v := range s.WeightVectors {
		if got := s.weight(v.Partition, v.Member); got != v.Weight {
			return nil, specErr(assignFile, fmt.Sprintf("weight_vectors[%d]", i), "weight(%d, %q) is %d by the constants above, not %d", v.Partition, v.Member, got, v.Weight)
		}
	}
	for i, v := range s.OwnerVectors {
		if got := s.owner(v.Partition, v.Members); got != v.Owner {
			return nil, specErr(assignFile, fmt.Sprintf("owner_vectors[%d]", i), "owner(%d, %q) is %q by the rule above, not %q", v.Partition, v.Members, got, v.Owner)
		}
	}
	return &s, nil
}

func genAssign(specDir string) ([]File, error) {
	s, err := LoadAssign(specDir)
	if err != nil {
		return nil, err
	}
	f := jen.NewFilePathName(wirePkg, "wire")
	f.Const().Defs(
		jen.Id("fnvOffset").Uint64().Op("=").Lit(s.FNV1a64.Offset),
		jen.Id("fnvPrime").Uint64().Op("=").Lit(s.FNV1a64.Prime),
		jen.Id("mixIncrement").Uint64().Op("=").Lit(s.SplitMix64.Increment),
	)

	// z = (z ^ (z >> shift)) * multiplier, per step
	mix := []jen.Code{jen.Id("z").Op(":=").Id("h").Op("+").Id("mixIncrement")}
	for _, st := range s.SplitMix64.Steps {
		mix = append(mix, jen.Id("z").Op("=").Parens(jen.Id("z").Op("^").Parens(jen.Id("z").Op(">>").Lit(int(st.Shift)))).Op("*").Lit(st.Multiplier))
	}
	mix = append(mix, jen.Return(jen.Id("z").Op("^").Parens(jen.Id("z").Op(">>").Lit(int(s.SplitMix64.FinalShift)))))

	f.Comment("Weight is the rendezvous weight of member for partition p:\nsplitmix64(fnv1a64(\"<p>@<member>\")) with p in decimal. It does not allocate.")
	body := []jen.Code{
		jen.Var().Id("digits").Index(jen.Lit(24)).Byte(),
		jen.Id("h").Op(":=").Id("fnvOffset"),
		jen.For(jen.List(jen.Id("_"), jen.Id("c")).Op(":=").Range().Qual("strconv", "AppendInt").Call(jen.Id("digits").Index(jen.Op(":").Lit(0)), jen.Int64().Call(jen.Id("p")), jen.Lit(10))).Block(
			jen.Id("h").Op("=").Parens(jen.Id("h").Op("^").Uint64().Call(jen.Id("c"))).Op("*").Id("fnvPrime"),
		),
		jen.Id("h").Op("=").Parens(jen.Id("h").Op("^").Uint64().Call(jen.LitRune('@'))).Op("*").Id("fnvPrime"),
		jen.For(jen.Id("i").Op(":=").Lit(0), jen.Id("i").Op("<").Len(jen.Id("member")), jen.Id("i").Op("++")).Block(
			jen.Id("h").Op("=").Parens(jen.Id("h").Op("^").Uint64().Call(jen.Id("member").Index(jen.Id("i")))).Op("*").Id("fnvPrime"),
		),
	}
	body = append(body, mix...)
	f.Func().Id("Weight").Params(jen.Id("p").Int(), jen.Id("member").String()).Uint64().Block(body...)

	f.Comment("Owner is the member that owns partition p: the highest Weight, ties to the smaller member id\n(bytewise); \"\" when members is empty.")
	f.Func().Id("Owner").Params(jen.Id("p").Int(), jen.Id("members").Index().String()).String().Block(
		jen.Var().Id("best").String(),
		jen.Var().Id("bestW").Uint64(),
		jen.For(jen.List(jen.Id("i"), jen.Id("m")).Op(":=").Range().Id("members")).Block(
			jen.Id("w").Op(":=").Id("Weight").Call(jen.Id("p"), jen.Id("m")),
			jen.If(jen.Id("i").Op("==").Lit(0).Op("||").Id("w").Op(">").Id("bestW").Op("||").Parens(jen.Id("w").Op("==").Id("bestW").Op("&&").Id("m").Op("<").Id("best"))).Block(
				jen.List(jen.Id("best"), jen.Id("bestW")).Op("=").List(jen.Id("m"), jen.Id("w")),
			),
		),
		jen.Return(jen.Id("best")),
	)
	code, err := renderGo("generated/wire/assign.go", f)
	if err != nil {
		return nil, err
	}

	// The vectors become a test of the generated code.
	t := jen.NewFilePathName(wirePkg, "wire")
	var wv, ov []jen.Code
	for _, v := range s.WeightVectors {
		wv = append(wv, jen.Values(jen.Lit(v.Partition), jen.Lit(v.Member), jen.Lit(v.Weight)))
	}
	for _, v := range s.OwnerVectors {
		ms := []jen.Code{}
		for _, m := range v.Members {
			ms = append(ms, jen.Lit(m))
		}
		ov = append(ov, jen.Values(jen.Lit(v.Partition), jen.Index().String().Values(ms...), jen.Lit(v.Owner)))
	}
	t.Func().Id("TestWeightVectors").Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
		jen.For(jen.List(jen.Id("_"), jen.Id("v")).Op(":=").Range().Index().Struct(
			jen.Id("p").Int(), jen.Id("member").String(), jen.Id("want").Uint64(),
		).Values(wv...)).Block(
			jen.If(jen.Id("got").Op(":=").Id("Weight").Call(jen.Id("v").Dot("p"), jen.Id("v").Dot("member")), jen.Id("got").Op("!=").Id("v").Dot("want")).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("Weight(%d, %q) = %d, want %d"), jen.Id("v").Dot("p"), jen.Id("v").Dot("member"), jen.Id("got"), jen.Id("v").Dot("want")),
			),
		),
	)
	t.Func().Id("TestOwnerVectors").Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
		jen.For(jen.List(jen.Id("_"), jen.Id("v")).Op(":=").Range().Index().Struct(
			jen.Id("p").Int(), jen.Id("members").Index().String(), jen.Id("want").String(),
		).Values(ov...)).Block(
			jen.If(jen.Id("got").Op(":=").Id("Owner").Call(jen.Id("v").Dot("p"), jen.Id("v").Dot("members")), jen.Id("got").Op("!=").Id("v").Dot("want")).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("Owner(%d, %q) = %q, want %q"), jen.Id("v").Dot("p"), jen.Id("v").Dot("members"), jen.Id("got"), jen.Id("v").Dot("want")),
			),
		),
	)
	test, err := renderGo("generated/wire/assign_vectors_test.go", t)
	if err != nil {
		return nil, err
	}
	return []File{code, test}, nil
}
