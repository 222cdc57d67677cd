//go:build unix

package store

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// walHeader maps the start of a SQLite database's WAL-index (the -shm
// file) read-only, to tell without a system call whether any connection
// has committed since a moment: every commit rewrites the index header
// (https://www.sqlite.org/walformat.html, "The WAL-Index Header": two
// copies of 48 bytes at offsets 0 and 48, the second written first; a
// commit moves mxFrame, or on a WAL restart the salts, and the checksum).
// Reading both copies and finding them equal is how SQLite itself reads
// the header without a lock.
//
// It is only a fast path: any doubt (copies that differ, a header not
// initialised, no file) sends the caller to PRAGMA data_version.
type walHeader struct{ mem []byte }

const walHeaderWords = 12 // 48 bytes

// openWALHeader maps dbPath's -shm file. Call it only while a connection
// of this process holds the database open in WAL mode: SQLite truncates
// the file only when no connection has it, and a mapping past the end of
// a truncated file would fault.
func openWALHeader(dbPath string) (*walHeader, bool) {
	real, err := filepath.EvalSymlinks(dbPath)
	if err != nil {
		return nil, false
	}
	f, err := os.Open(real + "-shm")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	const size = 4096
	if fi, err := f.Stat(); err != nil || fi.Size() < size {
		return nil, false
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, false
	}
	h := &walHeader{mem: mem}
	if v, ok := h.read(); !ok || !walHeaderInitialised(v) {
		h.close()
		return nil, false
	}
	return h, true
}

// read returns the header when both copies agree (no commit in progress).
// Atomic loads keep the two copies' reads in order on every architecture.
func (h *walHeader) read() (v [walHeaderWords]uint32, ok bool) {
	base := unsafe.Pointer(&h.mem[0])
	for i := range walHeaderWords {
		v[i] = atomic.LoadUint32((*uint32)(unsafe.Add(base, 4*i)))
	}
	for i := range walHeaderWords {
		if atomic.LoadUint32((*uint32)(unsafe.Add(base, 4*(walHeaderWords+i)))) != v[i] {
			return v, false
		}
	}
	return v, true
}

func (h *walHeader) close() { _ = syscall.Munmap(h.mem) }

// walHeaderInitialised checks the header's iVersion (3007000, in native
// byte order) and isInit fields.
func walHeaderInitialised(v [walHeaderWords]uint32) bool {
	return v[0] == 3007000 && *(*byte)(unsafe.Pointer(&v[3])) == 1
}
