package requestlog

import (
	"fmt"
	"testing"
	"time"
)

func packedLogs(t *testing.T, blob []byte, sec int64, acct, key string) []Log {
	t.Helper()
	out, err := Unpack(nil, blob, sec, acct, key)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return out
}

// A batch reads back as written, field for field, also when a field takes
// more distinct values than its table has slots, and values come back
// after they left it.
func TestLogBatchRoundTrip(t *testing.T) {
	sec := time.Date(2026, 11, 22, 12, 0, 7, 0, time.UTC).Unix()
	var logs []Log
	for i := range maxLogsPerBatch {
		logs = append(logs, Log{ID: fmt.Sprintf("req_%05d", i), AccountID: "acc_1", KeyID: "key_1",
			At:        time.UnixMilli(sec*1000 + int64(i*7%1000)).UTC(),
			Method:    []string{"GET", "POST", "DELETE"}[i%3],
			Route:     fmt.Sprintf("GET /v1/r%d", i%11), // 11 values: more than the slots
			Path:      fmt.Sprintf("/v1/p/%d", i%(i%5+1)),
			Status:    []int{200, 404, 429, 500, 201, 0}[i%6],
			ErrorCode: []string{"", "not_found", "rate_limited"}[i%3],
			Duration:  time.Duration(i*1013) * time.Microsecond,
			Client:    fmt.Sprintf("192.0.2.%d", i%17),
		})
	}
	b := Pack(logs).batches
	if len(b) != 1 || b[0].n != len(logs) || b[0].sec != sec || b[0].classes != 15 {
		t.Fatalf("%d batches: %+v", len(b), b[0].batchKey)
	}
	got := packedLogs(t, b[0].blob, sec, "acc_1", "key_1")
	if len(got) != len(logs) {
		t.Fatalf("%d logs, want %d", len(got), len(logs))
	}
	for i := range logs {
		if fmt.Sprint(got[i]) != fmt.Sprint(logs[i]) {
			t.Fatalf("log %d:\n got %+v\nwant %+v", i, got[i], logs[i])
		}
	}
	if per := len(b[0].blob) / len(logs); per > 48 {
		t.Errorf("%d bytes a log", per)
	}
}

// packLogs splits by account, key and second, and at maxLogsPerBatch.
func TestPackLogsSplits(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var logs []Log
	for i := range 2*maxLogsPerBatch + 10 {
		logs = append(logs, Log{ID: fmt.Sprint(i), AccountID: "acc_1", KeyID: "key_1", At: t0.Add(time.Duration(i%900) * time.Microsecond), Status: 200})
	}
	logs = append(logs,
		Log{ID: "a", AccountID: "acc_1", KeyID: "key_2", At: t0, Status: 500},
		Log{ID: "b", AccountID: "acc_2", KeyID: "key_1", At: t0, Status: 429},
		Log{ID: "c", AccountID: "acc_1", KeyID: "key_1", At: t0.Add(-time.Millisecond), Status: 404})
	var got []string
	for _, b := range Pack(logs).batches {
		got = append(got, fmt.Sprintf("%s/%s/%d:%d:%d", b.accountID, b.keyID, b.sec-t0.Unix(), b.n, b.classes))
	}
	want := "[acc_1/key_1/0:512:1 acc_1/key_1/0:512:1 acc_1/key_1/0:10:1 acc_1/key_2/0:1:8 acc_2/key_1/0:1:4 acc_1/key_1/-1:1:2]"
	if fmt.Sprint(got) != want {
		t.Errorf("batches %v\nwant %s", got, want)
	}
}

// A damaged or newer blob is an error, never a panic or a log made up.
func TestLogBatchDamaged(t *testing.T) {
	b := Pack([]Log{{ID: "req_1", AccountID: "a", KeyID: "k", At: time.UnixMilli(5_000), Method: "GET", Route: "GET /v1/me", Path: "/v1/me", Status: 200}}).batches[0].blob
	for _, bad := range [][]byte{nil, {}, {2}, b[:len(b)-1], append(append([]byte{}, b...), 0x80), append([]byte{1, 5, 'x'}, b[1:]...)} {
		var d Decoder
		d.Reset(bad, 5)
		var p Packed
		for d.Next(&p) {
		}
		if d.err == nil {
			t.Errorf("%q read without error", bad)
		}
	}
}

// FuzzLogBatch: any bytes decode without panic; any strings round-trip.
func FuzzLogBatch(f *testing.F) {
	f.Add([]byte{1, 3, 'a', 'b', 'c', 5, 200, 1, 9, 0, 3, 'G', 'E', 'T', 1, 0, 0, 0, 0, 0, 0, 0, 0}, "GET", "/v1/me", 404)
	f.Fuzz(func(t *testing.T, blob []byte, s1, s2 string, status int) {
		var d Decoder
		d.Reset(blob, 1)
		var p Packed
		for n := 0; d.Next(&p); n++ {
			if n > len(blob) {
				t.Fatal("more logs than bytes")
			}
		}
		var logs []Log
		for i := range 12 {
			logs = append(logs, Log{ID: s1 + fmt.Sprint(i), AccountID: "a", KeyID: "k", At: time.UnixMilli(1_000 + int64(i)).UTC(),
				Method: s1, Route: []string{s1, s2}[i%2], Path: s2 + fmt.Sprint(i%9), Status: status, ErrorCode: s2, Client: s1 + s2})
		}
		got := packedLogs(t, Pack(logs).batches[0].blob, 1, "a", "k")
		for i := range logs {
			want := logs[i]
			want.Status = min(max(want.Status, 0), 999)
			if fmt.Sprint(got[i]) != fmt.Sprint(want) {
				t.Fatalf("log %d:\n got %+v\nwant %+v", i, got[i], want)
			}
		}
	})
}

// A Buffer drops whole batches, oldest first, and a buffer put back
// before another keeps its logs first and takes no more.
func TestLogBuffer(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	add := func(b *Buffer, id string, key string, at time.Time) {
		b.Add(&Log{ID: id, AccountID: "acc", KeyID: key, At: at, Status: 200})
	}
	ids := func(b *Buffer) (out []string) {
		for _, bt := range b.Batches() {
			logs, _ := Unpack(nil, bt.Blob, bt.Sec, bt.AccountID, bt.KeyID)
			for _, l := range logs {
				out = append(out, l.ID)
			}
		}
		return out
	}
	var old Buffer
	add(&old, "a", "k1", t0)
	add(&old, "b", "k2", t0)
	add(&old, "c", "k1", t0)
	var cur Buffer
	add(&cur, "d", "k1", t0)
	cur.Prepend(&old)
	add(&cur, "e", "k1", t0) // joins d's batch, not a's
	if got := fmt.Sprint(ids(&cur)); got != "[a c b d e]" || cur.Len() != 5 || len(cur.batches) != 3 {
		t.Fatalf("after Prepend: %s, %d logs, %d batches", got, cur.Len(), len(cur.batches))
	}
	if n := cur.DropOldest(); n != 2 || cur.Len() != 3 {
		t.Fatalf("dropped %d, %d left", n, cur.Len())
	}
	if n := cur.DropOldest(); n != 1 {
		t.Fatalf("dropped %d", n)
	}
	if n := cur.DropOldest(); n != 2 || cur.Len() != 0 || cur.DropOldest() != 0 {
		t.Fatalf("dropped %d, %d left", n, cur.Len())
	}
	add(&cur, "f", "k1", t0) // the dropped batch is no longer open
	if got := fmt.Sprint(ids(&cur)); got != "[f]" {
		t.Fatalf("after dropping all: %s", got)
	}
}
