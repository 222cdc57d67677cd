package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

// version is the release this binary was built as, set when building:
//
//	go build -ldflags "-X main.version=1.1.0" ./cmd/agentapi
//
// Empty, the build's own record says what it can (versionOf). It must stay
// a variable: -X cannot set a constant, and says nothing when asked to.
var version string

// versionCmd prints the version alone on one line, for scripts and bug
// reports.
func versionCmd(_ context.Context, e env, args []string) error {
	if _, err := parse(e.newFlagSet("agentapi version"), args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo() // nil when the binary has no record
	_, err := fmt.Fprintln(e.stdout, versionOf(version, bi))
	return err
}

// versionOf is the version to print: the one set at build time; else the
// module's version, which the go command records from version control
// (`go install …@v1.1.0`, or `go build` in a clone: a tag, or a
// pseudo-version naming the commit, +dirty with uncommitted changes); else
// the commit alone, when only that was recorded, -dirty likewise; else
// "dev" (`go run`, `go test`, a build outside version control).
func versionOf(set string, bi *debug.BuildInfo) string {
	if set != "" {
		return set
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	rev = rev[:min(len(rev), 12)]
	if dirty {
		rev += "-dirty"
	}
	return rev
}
