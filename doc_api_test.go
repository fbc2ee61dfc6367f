package simba_test

import (
	"bytes"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// rootPkg is the package whose public surface TestPublicAPI checks.
const rootPkg = "github.com/simba-go/simba"

// spiPkg is the backend SPI; package simba may name its types in signatures (it is public) but
// must not re-export its backend-side types and constants.
const spiPkg = "github.com/simba-go/simba/spi"

// spiAliasesAllowed are the SPI types package simba may re-export as aliases: those an
// application names (a session id in events, the clock of WithClock).
var spiAliasesAllowed = []string{"SessionID", "Clock", "Timer"}

// spiNames are identifiers of the backend SPI (today's and the aliases package simba used to
// have) that must not be declared in package simba: an application never needs them, and in
// the root package's godoc they read as part of the application API.
var spiNames = []string{
	"Granted", "HeldBy", "SessionExpired", "AcquireKind", "AcquireReply", "KeepAliveReply",
	"StatusOK", "StatusExpired", "HintKind", "HintReleased", "HintGroup", "HintGroupChanged",
	"Hinter", "Inspector", "Snapshot", "LeaseInfo", "SessionInfo",
	"Class", "Retryable", "Permanent", "Classify", "AsPermanent", "Unavailable",
	"Millis", "MaxReplyDuration",
}

// TestPublicAPI checks the public surface of package simba, as `go doc -all` shows it and as
// the compiler exports it, against the rules of the v1 API (issue 14): no path or identifier of
// an internal package, no unexported type in an exported signature (an application cannot
// name it, and godoc shows it as an unexplained lowercase name), and none of the backend SPI's
// constants and types, which live in package spi. It checks rules, not a golden listing, so it
// keeps holding as the API changes; each violation is reported with where it is.
func TestPublicAPI(t *testing.T) {
	goTool := goCommand(t)
	doc := run(t, goTool, "doc", "-all", rootPkg)
	internalPkgs := internalImports(t, goTool)

	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// 1. go doc: no internal/ path anywhere, prose included; and no identifier of an internal
	// package in the declarations go doc prints (MaxTTL = engine.MaxDuration).
	for i, line := range strings.Split(doc, "\n") {
		if strings.Contains(line, "internal/") {
			report("go doc line %d mentions an internal/ path: %s", i+1, strings.TrimSpace(line))
		}
		code, ok := declarationCode(line)
		if !ok {
			continue
		}
		for _, p := range internalPkgs {
			if regexp.MustCompile(`(?:^|[^.\w])` + regexp.QuoteMeta(p.name) + `\.\w`).MatchString(code) {
				report("go doc line %d names the internal package %s: %s", i+1, p.path, strings.TrimSpace(line))
			}
		}
	}

	// 2. The exported API as the compiler sees it: no SPI name declared at package level, no
	// re-export of the SPI's backend-side types and constants, no unexported or internal type
	// in what a declaration shows.
	pkg := exportedPackage(t, goTool)
	for _, name := range pkg.Scope().Names() {
		obj := pkg.Scope().Lookup(name)
		if !obj.Exported() {
			continue
		}
		where := fmt.Sprintf("%s (%s)", name, objKind(obj))
		if slices.Contains(spiNames, name) {
			report("%s: %s is a name of the backend SPI; it belongs in package spi", where, name)
		}
		checkSPIReexport(obj, report)
		w := &apiWalker{root: pkg, seen: map[types.Type]bool{}, report: func(what string) {
			report("%s: its signature shows %s", where, what)
		}}
		switch obj := obj.(type) {
		case *types.TypeName:
			if obj.IsAlias() {
				w.walk(types.Unalias(obj.Type()), obj.Type())
				continue
			}
			named, ok := obj.Type().(*types.Named)
			if !ok {
				continue
			}
			w.walkDecl(named)
			for m := range named.Methods() {
				if m.Exported() {
					w.walk(m.Type(), m.Type())
				}
			}
		default:
			w.walk(obj.Type(), obj.Type())
		}
	}

	if len(problems) > 0 {
		t.Errorf("the public API of package simba breaks %d rule(s) of the v1 API:\n  %s",
			len(problems), strings.Join(problems, "\n  "))
	}
}

// goCommand returns the go command of the toolchain running the test.
func goCommand(t *testing.T) string {
	t.Helper()
	if root := runtime.GOROOT(); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	return p
}

func run(t *testing.T, goTool string, args ...string) string {
	t.Helper()
	cmd := exec.Command(goTool, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// declarationCode returns the Go code of a line of `go doc -all` output, without its comment,
// and false for prose: go doc indents doc text by four spaces and prints declarations flush
// left or, inside a block, indented by tabs.
func declarationCode(line string) (string, bool) {
	if strings.HasPrefix(line, "    ") || strings.TrimSpace(line) == "" {
		return "", false
	}
	code := line
	if i := strings.Index(code, "//"); i >= 0 {
		code = code[:i]
	}
	code = strings.TrimSpace(code)
	return code, code != ""
}

// internalPkg is an internal package package simba imports.
type internalPkg struct{ path, name string }

func internalImports(t *testing.T, goTool string) []internalPkg {
	t.Helper()
	var out []internalPkg
	for _, path := range strings.Fields(run(t, goTool, "list", "-f", `{{join .Imports " "}}`, rootPkg)) {
		if !isInternal(path) {
			continue
		}
		name := strings.TrimSpace(run(t, goTool, "list", "-f", "{{.Name}}", path))
		out = append(out, internalPkg{path: path, name: name})
	}
	return out
}

func isInternal(path string) bool {
	return strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// exportedPackage loads package simba from the compiler's export data: exactly what another
// package can see of it.
func exportedPackage(t *testing.T, goTool string) *types.Package {
	t.Helper()
	exports := map[string]string{}
	for _, line := range strings.Split(run(t, goTool, "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", rootPkg), "\n") {
		if path, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	pkg, err := imp.Import(rootPkg)
	if err != nil {
		t.Fatalf("loading the export data of %s: %v", rootPkg, err)
	}
	return pkg
}

func objKind(obj types.Object) string {
	switch obj := obj.(type) {
	case *types.Const:
		return "const"
	case *types.Var:
		return "var"
	case *types.Func:
		return "func"
	case *types.TypeName:
		if obj.IsAlias() {
			return "type alias"
		}
		return "type"
	}
	return "object"
}

// checkSPIReexport reports an exported constant of an SPI type (simba.Granted = spi.Granted)
// and an alias of an SPI type an application does not need.
func checkSPIReexport(obj types.Object, report func(string, ...any)) {
	switch obj := obj.(type) {
	case *types.Const:
		if n, ok := types.Unalias(obj.Type()).(*types.Named); ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == spiPkg {
			report("%s (const): re-exports a constant of the SPI type spi.%s: it belongs in package spi", obj.Name(), n.Obj().Name())
		}
	case *types.TypeName:
		if !obj.IsAlias() {
			return
		}
		if n, ok := types.Unalias(obj.Type()).(*types.Named); ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == spiPkg &&
			!slices.Contains(spiAliasesAllowed, n.Obj().Name()) {
			report("%s (type alias): re-exports the SPI type spi.%s: name spi.%s instead", obj.Name(), n.Obj().Name(), n.Obj().Name())
		}
	}
}

// apiWalker walks the types an exported declaration of package root shows, reporting every
// named type an importer cannot name or may not import: unexported types and types of internal
// packages. It descends into the declaration it was started on (walkDecl), not into the named
// types it meets: root's exported ones are checked on their own, other packages' are their API.
type apiWalker struct {
	root   *types.Package
	seen   map[types.Type]bool
	report func(what string)
}

// walk visits typ; shown is how the declaration spells it (an alias keeps its name).
func (w *apiWalker) walk(typ, shown types.Type) {
	if a, ok := shown.(*types.Alias); ok {
		w.checkName(a.Obj())
	}
	if w.seen[typ] {
		return
	}
	w.seen[typ] = true
	switch t := typ.(type) {
	case *types.Named:
		w.checkName(t.Obj())
		// Root's exported types are checked as declarations of their own; other packages'
		// types are their API. Only type arguments are spelled here.
		for arg := range t.TypeArgs().Types() {
			w.walk(types.Unalias(arg), arg)
		}
	case *types.Alias:
		w.walk(types.Unalias(t), t)
	case *types.Pointer:
		w.walk(types.Unalias(t.Elem()), t.Elem())
	case *types.Slice:
		w.walk(types.Unalias(t.Elem()), t.Elem())
	case *types.Array:
		w.walk(types.Unalias(t.Elem()), t.Elem())
	case *types.Map:
		w.walk(types.Unalias(t.Key()), t.Key())
		w.walk(types.Unalias(t.Elem()), t.Elem())
	case *types.Chan:
		w.walk(types.Unalias(t.Elem()), t.Elem())
	case *types.Signature:
		for tp := range t.TypeParams().TypeParams() {
			w.walk(tp.Constraint(), tp.Constraint())
		}
		for v := range t.Params().Variables() {
			w.walk(types.Unalias(v.Type()), v.Type())
		}
		for v := range t.Results().Variables() {
			w.walk(types.Unalias(v.Type()), v.Type())
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() {
				w.walk(types.Unalias(f.Type()), f.Type())
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			if m.Exported() {
				w.walk(m.Type(), m.Type())
			}
		}
		for e := range t.EmbeddedTypes() {
			w.walk(types.Unalias(e), e)
		}
	case *types.Union:
		for term := range t.Terms() {
			w.walk(types.Unalias(term.Type()), term.Type())
		}
	case *types.TypeParam:
		w.walk(t.Constraint(), t.Constraint())
	}
}

// walkDecl visits what the declaration of root's own named type t shows: its underlying type
// (exported fields and methods only, as go doc prints them) and its type parameters.
func (w *apiWalker) walkDecl(t *types.Named) {
	for tp := range t.TypeParams().TypeParams() {
		w.walk(tp.Constraint(), tp.Constraint())
	}
	w.walk(t.Underlying(), t.Underlying())
}

func (w *apiWalker) checkName(obj *types.TypeName) {
	if obj.Pkg() == nil { // predeclared: error, comparable, any
		return
	}
	short := types.TypeString(obj.Type(), types.RelativeTo(w.root))
	switch {
	case isInternal(obj.Pkg().Path()):
		w.report(fmt.Sprintf("%s, a type of the internal package %s", short, obj.Pkg().Path()))
	case !obj.Exported():
		w.report(fmt.Sprintf("the unexported type %s", short))
	}
}
