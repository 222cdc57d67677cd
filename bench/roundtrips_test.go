package main

import "testing"

func TestScriptCalls(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_get:calls=9,usec=1,usec_per_call=0.1\r\n" +
		"cmdstat_evalsha:calls=120,usec=5,usec_per_call=0.04,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=3,usec=1\r\ncmdstat_fcall_ro:calls=2,usec=1\r\ncmdstat_evalshax:calls=1000\r\n"
	if got := scriptCalls(info); got != 125 {
		t.Fatalf("scriptCalls = %d, want 125", got)
	}
}
