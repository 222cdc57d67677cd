package main

import (
	"os"
	"testing"
)

// TestBinaryBuiltBeforeTests: the program exists before any test asks for
// it (TestMain built it), so no test's time includes a cold build.
func TestBinaryBuiltBeforeTests(t *testing.T) {
	if binPath == "" {
		t.Fatal("no binary built before the tests")
	}
	if _, err := os.Stat(binPath); err != nil {
		t.Fatal(err)
	}
}
