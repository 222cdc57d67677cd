package ratelimit

import "testing"

// TestKeySlotIsRedisCluster: the slots Redis Cluster's specification gives
// (CLUSTER KEYSLOT of Redis 7.0), hash tags included.
func TestKeySlotIsRedisCluster(t *testing.T) {
	for key, want := range map[string]uint16{
		"123456789":            0x31c3 % clusterSlots, // CRC16/XMODEM's check value
		"foo":                  12182,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           8363,
		"{agentapi:rl:k}:win":  keySlot("agentapi:rl:k"),
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}
