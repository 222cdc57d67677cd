package main

import (
	"testing"
	"time"
)

func TestRedisCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\nused_cpu_sys_children:9.000000\r\nused_cpu_user_children:9.0\r\n"
	if got, want := redisCPU(info), 1750*time.Millisecond; got != want {
		t.Fatalf("redisCPU = %v, want %v", got, want)
	}
}

func TestSinceCountsNewBackendsWhole(t *testing.T) {
	before := reading{serve: time.Second, pg: map[int]time.Duration{1: time.Second, 2: time.Second}, redis: time.Second}
	after := reading{serve: 3 * time.Second, pg: map[int]time.Duration{1: 2 * time.Second, 3: 500 * time.Millisecond}, redis: 4 * time.Second}
	got := after.since(before)
	if want := (cost{serve: 2 * time.Second, pg: 1500 * time.Millisecond, redis: 3 * time.Second}); got != want {
		t.Fatalf("since = %+v, want %+v", got, want)
	}
}
