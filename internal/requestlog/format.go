package requestlog

import (
	"encoding/binary"
	"errors"
	"slices"
	"time"
)

// A request log batch is one row of request_log_batches (migration 0012):
// up to maxLogsPerBatch logs of one account and key whose times fall in one
// second, packed into one blob. This file is the blob's format; what reads
// and writes the rows is the store's (internal/store/requestlogs.go).
//
// Format 1: the byte 1, then each log in turn:
//
//	id        uvarint length, then its bytes
//	at        uvarint: milliseconds past the batch's second
//	status    uvarint
//	duration  uvarint: microseconds
//	method, route, path, error code, client: a string each, by table
//
// A string "by table" is written once and then referred to: each of those
// five fields has a table of the last eight distinct values the batch
// wrote. A value in its table is written as uvarint(i+1), its slot; any
// other as uvarint(0), its length and bytes, after which it takes the
// table's next slot in turn. The reader keeps the same tables, so a batch
// of a key polling one path stores each log in its id and a dozen bytes.
const (
	logBatchFormat  = 1
	maxLogsPerBatch = 512
	tableSlots      = 8
)

// errBadBatch is a blob this release cannot read: a newer format, or one
// damaged.
var errBadBatch = errors.New("request log batch: unreadable blob")

// ClassBit is class's bit in a batch's classes column, so a filter by
// class or status skips the batches holding none.
func ClassBit(class string) int {
	switch class {
	case Class2xx:
		return 1
	case Class4xx:
		return 2
	case Class429:
		return 4
	case Class5xx:
		return 8
	}
	return 0
}

type strTable struct {
	v    [tableSlots]string
	n    int // slots filled
	next int // the slot the next new value takes
}

func (t *strTable) add(s string) {
	t.v[t.next] = s
	if t.n < tableSlots {
		t.n++
	}
	t.next = (t.next + 1) % tableSlots
}

func (t *strTable) append(b []byte, s string) []byte {
	if i := slices.Index(t.v[:t.n], s); i >= 0 {
		return binary.AppendUvarint(b, uint64(i+1))
	}
	t.add(s)
	return appendStr(binary.AppendUvarint(b, 0), s)
}

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

type batchKey struct {
	accountID, keyID string
	sec              int64
}

type logBatch struct {
	batchKey
	blob                              []byte
	n                                 int // logs packed
	classes                           int // bits of their classes
	method, route, path, code, client strTable
}

// add packs l, whose time is atMS, within the batch's second.
func (bt *logBatch) add(l *Log, atMS int64) {
	b := appendStr(bt.blob, l.ID)
	b = binary.AppendUvarint(b, uint64(atMS-bt.sec*1000))
	b = binary.AppendUvarint(b, uint64(max(l.Status, 0)))
	b = binary.AppendUvarint(b, uint64(max(l.Duration.Microseconds(), 0)))
	b = bt.method.append(b, l.Method)
	b = bt.route.append(b, l.Route)
	b = bt.path.append(b, l.Path)
	b = bt.code.append(b, l.ErrorCode)
	bt.blob = bt.client.append(b, l.Client)
	bt.n++
	bt.classes |= ClassBit(ClassOf(l.Status))
}

// Packed is a log as read from a blob: id still the blob's bytes, so a
// log a filter drops costs no allocation for it.
type Packed struct {
	id                                []byte
	at                                int64 // Unix milliseconds
	status                            int
	durationUS                        int64
	method, route, path, code, client string
}

// Decoder reads a blob's logs in turn.
type Decoder struct {
	b                                 []byte
	sec                               int64
	err                               error
	method, route, path, code, client strTable
}

// Reset makes d read blob, of second sec, from its start: one decoder
// serves every batch a page reads, most of which hold one log when an
// account's requests are sparse (BenchmarkLogsPage).
func (d *Decoder) Reset(blob []byte, sec int64) {
	for _, t := range []*strTable{&d.method, &d.route, &d.path, &d.code, &d.client} {
		t.n, t.next = 0, 0
	}
	d.b, d.sec, d.err = nil, sec, nil
	if len(blob) == 0 || blob[0] != logBatchFormat {
		d.err = errBadBatch
		return
	}
	d.b = blob[1:]
}

// Next reads the next log into p; false at the end or on a damaged blob
// (then err says so).
func (d *Decoder) Next(p *Packed) bool {
	if d.err != nil || len(d.b) == 0 {
		return false
	}
	p.id = d.bytes()
	ms := d.uvarint()
	p.at = d.sec*1000 + int64(min(ms, 999))
	p.status = int(min(d.uvarint(), 999))
	p.durationUS = int64(min(d.uvarint(), 1<<53))
	p.method = d.str(&d.method)
	p.route = d.str(&d.route)
	p.path = d.str(&d.path)
	p.code = d.str(&d.code)
	p.client = d.str(&d.client)
	return d.err == nil
}

func (d *Decoder) fail() {
	d.err, d.b = errBadBatch, nil
}

func (d *Decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *Decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

func (d *Decoder) str(t *strTable) string {
	i := d.uvarint()
	if i == 0 {
		s := string(d.bytes())
		t.add(s)
		return s
	}
	if i > uint64(t.n) {
		d.fail()
		return ""
	}
	return t.v[i-1]
}

// Seen is p's time (Unix milliseconds), status and client address: what
// the usage flush reads of a log to notice a key's new networks
// (internal/store, anomalies.go), without building the whole Log.
func (p *Packed) Seen() (atMS int64, status int, client string) { return p.at, p.status, p.client }

// Log is p as a Log of the batch's account and key.
func (p *Packed) Log(accountID, keyID string) Log {
	return Log{ID: string(p.id), AccountID: accountID, KeyID: keyID, At: time.UnixMilli(p.at).UTC(),
		Method: p.method, Route: p.route, Path: p.path, Status: p.status, ErrorCode: p.code,
		Duration: time.Duration(p.durationUS) * time.Microsecond, Client: p.client}
}

// Buffer holds request logs packed as the store keeps them, ready for
// WritePackedUsage: bytes the garbage collector does not scan (measured at
// usage.Recorder.Record). Not safe for concurrent use; the zero value is
// empty.
type Buffer struct {
	batches []*logBatch
	open    map[batchKey]*logBatch // the batches still taking logs
	last    *logBatch              // the one the last log went to, while open
	n       int
}

// Add packs l. Logs come in runs of one key and second: the map is looked
// up only at a run's start.
func (b *Buffer) Add(l *Log) {
	ms := l.At.UnixMilli()
	k := batchKey{accountID: l.AccountID, keyID: l.KeyID, sec: FloorSec(ms)}
	bt := b.last
	if bt == nil || bt.batchKey != k {
		if bt = b.open[k]; bt == nil {
			if b.open == nil {
				b.open = map[batchKey]*logBatch{}
			}
			bt = &logBatch{batchKey: k, blob: append(make([]byte, 0, 256), logBatchFormat)}
			b.open[k] = bt
			b.batches = append(b.batches, bt)
		}
		b.last = bt
	}
	bt.add(l, ms)
	b.n++
	if bt.n == maxLogsPerBatch {
		delete(b.open, k)
		b.last = nil
	}
}

// Len is how many logs b holds.
func (b *Buffer) Len() int { return b.n }

// DropOldest drops the batch b started first and returns how many logs it
// held (0 when b is empty).
func (b *Buffer) DropOldest() int {
	if len(b.batches) == 0 {
		return 0
	}
	bt := b.batches[0]
	b.batches[0] = nil
	b.batches = b.batches[1:]
	if b.open[bt.batchKey] == bt {
		delete(b.open, bt.batchKey)
	}
	if b.last == bt {
		b.last = nil
	}
	b.n -= bt.n
	return bt.n
}

// Prepend puts older's logs before b's (a batch that failed to be written,
// put back); older's batches take no more logs.
func (b *Buffer) Prepend(older *Buffer) {
	b.batches = append(older.batches[:len(older.batches):len(older.batches)], b.batches...)
	b.n += older.n
}

// Batch is one packed batch as the store writes it: a row of
// request_log_batches.
type Batch struct {
	AccountID, KeyID string
	Sec              int64
	N, Classes       int
	Blob             []byte
}

// Batches are b's batches, in the order they were started.
func (b *Buffer) Batches() []Batch {
	out := make([]Batch, len(b.batches))
	for i, bt := range b.batches {
		out[i] = Batch{AccountID: bt.accountID, KeyID: bt.keyID, Sec: bt.sec, N: bt.n, Classes: bt.classes, Blob: bt.blob}
	}
	return out
}

// Pack packs logs, in the order they come.
func Pack(logs []Log) *Buffer {
	var b Buffer
	for i := range logs {
		b.Add(&logs[i])
	}
	return &b
}

// Unpack appends to out the logs of a batch of second sec, account and key.
func Unpack(out []Log, blob []byte, sec int64, accountID, keyID string) ([]Log, error) {
	var d Decoder
	var p Packed
	d.Reset(blob, sec)
	for d.Next(&p) {
		out = append(out, p.Log(accountID, keyID))
	}
	return out, d.err
}

// Err is what stopped Next early: a damaged or newer blob, or nil.
func (d *Decoder) Err() error { return d.err }
