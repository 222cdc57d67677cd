package ratelimit

import (
	"slices"
	"testing"
)

// TestClusterOptions: redis+cluster:// names every start address, keeps
// the password and the query's options, and refuses a URL without hosts.
func TestClusterOptions(t *testing.T) {
	o, err := ClusterOptions("redis+cluster://:s3cret@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002?dial_timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.0.0.1:7000", "10.0.0.2:7001", "[::1]:7002"}; !slices.Equal(o.Addrs, want) {
		t.Fatalf("addrs %v, want %v", o.Addrs, want)
	}
	if o.Password != "s3cret" || o.DialTimeout.Seconds() != 1 || o.Protocol != 2 || !o.ContextTimeoutEnabled || o.DialerRetries != 1 {
		t.Fatalf("options %+v", o)
	}
	if o, err := ClusterOptions("rediss+cluster://h:1"); err != nil || o.TLSConfig == nil {
		t.Fatalf("rediss+cluster: %v, TLS %v", err, o)
	}
	for _, bad := range []string{"redis+cluster://", "redis+cluster://a:1,,b:2", "redis://a:1", "http+cluster://a:1"} {
		if _, err := ClusterOptions(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if !IsClusterURL("redis+cluster://a:1") || IsClusterURL("redis://a:1") {
		t.Fatal("IsClusterURL")
	}
}
