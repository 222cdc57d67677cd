package store

import (
	"context"
	"fmt"
	"testing"
)

// An account's agent write moves the count its own list pages are held
// under, and not the count of an account in another share: one busy writer
// must not make every account's held pages be read again.
func TestAgentWritesCountByShare(t *testing.T) {
	s := &Store{}
	a := "acc_writer"
	var b string
	for i := 0; b == ""; i++ {
		if c := fmt.Sprintf("acc_other_%d", i); agentWriteShare(c) != agentWriteShare(a) {
			b = c
		}
	}
	wa, _ := s.AgentWrites(a)
	wb, _ := s.AgentWrites(b)
	s.agentsChanged(context.Background(), a)
	if n, _ := s.AgentWrites(a); n != wa+1 {
		t.Errorf("the writer's count is %d after one write, want %d", n, wa+1)
	}
	if n, _ := s.AgentWrites(b); n != wb {
		t.Errorf("another share's count moved from %d to %d on the writer's write", wb, n)
	}
}
