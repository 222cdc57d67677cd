package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		set  string
		bi   *debug.BuildInfo
		want string
	}{
		{"set at build time wins", "1.1.0", &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}}, "1.1.0"},
		{"no build info", "", nil, "dev"},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.1.0"}, Settings: vcs("vcs.revision", rev)}, "v1.1.0"},
		{"pseudo-version of a clone", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261122120000-0123456789ab+dirty"}}, "v0.0.0-20261122120000-0123456789ab+dirty"},
		{"devel with a revision", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", rev, "vcs.modified", "false")}, "0123456789ab"},
		{"devel with a modified tree", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.modified", "true", "vcs.revision", rev)}, "0123456789ab-dirty"},
		{"devel without version control", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"empty module version", "", &debug.BuildInfo{}, "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionOf(tt.set, tt.bi); got != tt.want {
				t.Fatalf("versionOf(%q, …) = %q, want %q", tt.set, got, tt.want)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"version"}, func(string) string { return "" }, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	bi, _ := debug.ReadBuildInfo()
	if want := versionOf(version, bi) + "\n"; out.String() != want || errOut.Len() != 0 {
		t.Fatalf("stdout %q, stderr %q; want stdout %q", out.String(), errOut.String(), want)
	}

	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"version", "extra"}, func(string) string { return "" }, nil, &out, &errOut); code != 2 {
		t.Fatalf("version extra: exit %d, want 2", code)
	}
	if out.Len() != 0 || !strings.Contains(errOut.String(), "agentapi: version: expects no arguments") {
		t.Fatalf("version extra: stdout %q, stderr %q", out.String(), errOut.String())
	}
}

// TestVersionSetByLinker: a release build's -ldflags "-X main.version=…"
// reaches the output (it would not if version were a constant, or renamed:
// the linker ignores an -X it cannot apply).
func TestVersionSetByLinker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program")
	}
	bin := filepath.Join(t.TempDir(), "agentapi")
	// Built as TestMain built the program (-race or not), so that only the
	// link is new: otherwise every package compiles again, minutes cold.
	args := []string{"build", "-ldflags", "-X main.version=9.8.7-test", "-o", bin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "9.8.7-test\n" {
		t.Fatalf("agentapi version printed %q, want %q", out, "9.8.7-test\n")
	}
}
