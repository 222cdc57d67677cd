package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNoGCHeadroomFlag: the GC headroom tuner is gone (issue 30: it did
// not pay for itself end to end); GOGC and GOMEMLIMIT tune the collector.
func TestNoGCHeadroomFlag(t *testing.T) {
	_, errs, code := cli(t, filepath.Join(t.TempDir(), "gc.db"), "", "serve", "--gc-headroom-mib", "32")
	if code != 2 || !strings.Contains(errs, "has no flag --gc-headroom-mib") {
		t.Fatalf("exit %d, %q", code, errs)
	}
}
