package client

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestCodesMatchDomain pins the client's Code* constants to the server's
// error table: the same names with the same values, none missing on either
// side. The constants are read from the source, so a code added to one
// package and not the other fails here without anyone keeping a list.
func TestCodesMatchDomain(t *testing.T) {
	clientCodes := codeConstants(t, ".")
	domainCodes := codeConstants(t, filepath.Join("..", "internal", "domain"))
	if len(clientCodes) == 0 || len(domainCodes) == 0 {
		t.Fatalf("no Code* constants found: client %d, domain %d", len(clientCodes), len(domainCodes))
	}
	for name, v := range domainCodes {
		if got, ok := clientCodes[name]; !ok {
			t.Errorf("client lacks %s = %q", name, v)
		} else if got != v {
			t.Errorf("client.%s = %q, domain.%s = %q", name, got, name, v)
		}
	}
	for name, v := range clientCodes {
		if _, ok := domainCodes[name]; !ok {
			t.Errorf("client.%s = %q is not in domain's error table", name, v)
		}
	}

	// domain.Codes is the table at run time: exactly domain's constants,
	// each once.
	var table []string
	for _, c := range domain.Codes {
		table = append(table, string(c))
	}
	slices.Sort(table)
	consts := slices.Sorted(maps.Values(domainCodes))
	if !slices.Equal(table, consts) {
		t.Errorf("domain.Codes %v, domain's Code* constants %v", table, consts)
	}
}

// codeConstants returns the exported constants named Code* declared in the
// non-test files of dir, by name, with their string values. A Code*
// constant whose value is not a string literal fails the test: it could not
// be compared.
func codeConstants(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		codeConstantsInFile(t, fset, f, out)
	}
	return out
}

// codeConstantsInFile adds the Code* constants of f's const declarations
// to out.
func codeConstantsInFile(t *testing.T, fset *token.FileSet, f *ast.File, out map[string]string) {
	t.Helper()
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			codeConstantsInSpec(t, fset, spec.(*ast.ValueSpec), out)
		}
	}
}

// codeConstantsInSpec adds the exported Code* names of one const spec to
// out with their string values; a value that is not a string literal, or a
// name already in out, fails the test.
func codeConstantsInSpec(t *testing.T, fset *token.FileSet, vs *ast.ValueSpec, out map[string]string) {
	t.Helper()
	for i, name := range vs.Names {
		if !strings.HasPrefix(name.Name, "Code") || !name.IsExported() {
			continue
		}
		var lit *ast.BasicLit
		if i < len(vs.Values) {
			lit, _ = vs.Values[i].(*ast.BasicLit)
		}
		if lit == nil || lit.Kind != token.STRING {
			t.Fatalf("%s: %s is not a string literal", fset.Position(name.Pos()), name.Name)
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := out[name.Name]; dup {
			t.Fatalf("%s: %s declared twice", fset.Position(name.Pos()), name.Name)
		}
		out[name.Name] = v
	}
}
