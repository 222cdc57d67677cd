package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// heldWrite matches SQL that writes what a key or agent-list page held in
// memory may show: keys, their agent restrictions, agents, accounts.
var heldWrite = regexp.MustCompile(`(?is)\b(UPDATE|INSERT INTO|DELETE FROM)\s+(api_keys|api_key_agents|agents|accounts)\b`)

// raisesEpoch are the calls that make a transaction tell the tracker what
// it changed (epoch.go, Tx.changeKey).
var raisesEpoch = []string{"keysChanged", "agentsChanged", "changeKey"}

// heldWriteExempt are the functions that write those tables without
// raising an epoch, each with the reason nothing held can be wrong after.
var heldWriteExempt = map[string]string{
	"CreateAccount":     "a new account: nothing holds it",
	"SetAccountFeature": "account features: no held key or page shows them",
	"RenameAccount":     "the account's name: no held key or page shows it",
	"refoldAgentNames":  "name_key only, which no page shows; run when the database opens",
	"touchAfterIdle":    "last_used_at: no decision reads it from a held key",
	"TouchKeys":         "last_used_at: no decision reads it from a held key",
	"applyKeyEdit":      "runs inside changeKey's apply (EditKey)",
	"createKey":         "a new key: nothing holds it",
	"insertKeyAgents":   "a new key's restriction, or inside changeKey's apply (setKeyAccess)",
}

// TestEveryHeldWriteRaisesItsEpoch: every function of the store that
// writes keys, agents or accounts raises the key epoch or notes the agent
// list's change in its transaction (so the tracker tells every instance),
// or is exempt for a stated reason. A new write fails here until it does
// one or the other: forgetting would let caches serve stale data,
// silently (docs/production.md, "Key epochs").
func TestEveryHeldWriteRaisesItsEpoch(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			checkHeldWrites(t, name, seen)
		}
	}
	for fn := range heldWriteExempt {
		if !seen[fn] {
			t.Errorf("exempt %s writes nothing held any more: drop it from the list", fn)
		}
	}
}

// checkHeldWrites checks the functions of the file name, adding those
// that write something held to seen.
func checkHeldWrites(t *testing.T, name string, seen map[string]bool) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		writes, raises := scanHeldWrites(fd)
		if writes == "" {
			continue
		}
		seen[fd.Name.Name] = true
		if _, exempt := heldWriteExempt[fd.Name.Name]; !raises && !exempt {
			t.Errorf("%s: %s writes %q and raises no epoch (call one of %v in its transaction, or exempt it with a reason)",
				name, fd.Name.Name, writes, raisesEpoch)
		}
	}
}

// scanHeldWrites returns the first held write fd's SQL makes ("" for
// none), and whether fd calls one of raisesEpoch.
func scanHeldWrites(fd *ast.FuncDecl) (write string, raises bool) {
	ast.Inspect(fd, func(n ast.Node) bool {
		switch v := n.(type) {
		case *ast.BasicLit:
			if w := heldWrite.FindString(v.Value); v.Kind == token.STRING && w != "" && write == "" {
				write = w
			}
		case *ast.SelectorExpr:
			for _, r := range raisesEpoch {
				raises = raises || v.Sel.Name == r
			}
		}
		return true
	})
	return write, raises
}
