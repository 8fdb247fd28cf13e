//go:build linux

package filelock

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A Mutex's waiters line up across processes. A waiter whose first attempt
// fails takes a ticket: a FIFO in <base>.line/, named by its arrival time,
// that the waiter keeps open for reading and writing. A release opens the
// earliest ticket for writing and writes one byte, which wakes that waiter
// alone, in whatever process it is. Opening a FIFO that nobody has open
// fails with ENXIO: its waiter's process died, and the release deletes the
// ticket and rings the next. The line only decides whom a release wakes;
// flock alone decides who holds the lock.

// lineSuffix ends the name of a Mutex's line directory, beside its files.
const lineSuffix = ".line"

// ticket is a waiter's place in a line.
type ticket struct {
	path string
	f    *os.File // read end, in the runtime poller; held open while waiting
	done chan struct{}
}

// takeTicket joins the line of the lock at base, and reports whether the
// ticket is the earliest in it. woken is called, from the ticket's
// goroutine, each time a release rings it.
func takeTicket(base string, woken func()) (*ticket, bool, error) {
	dir := base + lineSuffix
	for range 3 {
		name := ticketName(time.Now())
		f, err := makeFIFO(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		// A release that found the FIFO before we opened it took it for a
		// dead waiter's and deleted it: then we are not in the line.
		names, err := lineNames(dir)
		if err != nil {
			// Not a directory we read: a symbolic link, say.
			_ = f.Close()
			_ = os.Remove(f.Name())
			return nil, false, err
		}
		i, in := slices.BinarySearch(names, name)
		if !in {
			_ = f.Close()
			continue
		}
		t := &ticket{path: f.Name(), f: f, done: make(chan struct{})}
		go t.listen(woken)
		return t, i == 0, nil
	}
	return nil, false, fmt.Errorf("no place in the line %s", dir)
}

// makeFIFO creates the FIFO path, and its directory if needed, and opens
// it for reading and writing: a FIFO with no writer reads as end of file
// at once, so the ticket is its own writer and its reads block.
func makeFIFO(path string) (*os.File, error) {
	err := unix.Mkfifo(path, filePerm)
	if errors.Is(err, unix.ENOENT) {
		if err := os.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
			return nil, err
		}
		err = unix.Mkfifo(path, filePerm)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "mkfifo", Path: path, Err: err}
	}
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NONBLOCK|oNoFollow, 0)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = os.Remove(path)
	}
	return f, err
}

func (t *ticket) listen(woken func()) {
	defer close(t.done)
	var b [64]byte
	for {
		if _, err := t.f.Read(b[:]); err != nil {
			return // closed by leave
		}
		woken()
	}
}

// unlink takes t out of its line: no release rings it after this.
func (t *ticket) unlink() { _ = os.Remove(t.path) }

// close stops t's goroutine, once t is unlinked.
func (t *ticket) close() {
	_ = t.f.Close()
	<-t.done
}

// lineNames lists the tickets of a line, earliest first: FIFOs named as
// takeTicket names them. Anything else in the directory is ignored, and a
// symbolic link in place of the directory is not followed, so a release
// never writes to a file planted there.
func lineNames(dir string) ([]string, error) {
	d, err := openFile(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type() == fs.ModeNamedPipe && isTicket(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, err
}

// ticketName is the name of a ticket taken at t: the time in 16 hex
// digits, so names sort by arrival, and 8 random ones.
func ticketName(t time.Time) string {
	return fmt.Sprintf("%016x-%08x", t.UnixNano(), rand.Uint32())
}

func isTicket(name string) bool {
	if len(name) != 25 || name[16] != '-' {
		return false
	}
	for i, c := range []byte(name) {
		if i != 16 && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// openTicket opens the ticket at path for writing without waiting. It
// fails with ENXIO when no waiter has the ticket open, and with EINVAL
// when path is not a FIFO (then it was replaced since the directory was
// read).
func openTicket(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		_ = unix.Close(fd)
		return -1, unix.EINVAL
	}
	return fd, nil
}

// rings is how many waiters at the front of a line a release wakes: the
// first to run takes the lock, and the others keep their places.
const rings = 2

// nextInLine opens the earliest live tickets, up to rings of them, of the
// line of the lock at base for writing, deleting the tickets of dead
// waiters on the way. It opens with raw system calls, so a ring never
// waits in the runtime poller.
func nextInLine(base string) []int {
	dir := base + lineSuffix
	names, err := lineNames(dir)
	if err != nil {
		return nil
	}
	var fds []int
	for _, name := range names {
		path := filepath.Join(dir, name)
		fd, err := openTicket(path)
		if err == nil {
			if fds = append(fds, fd); len(fds) == rings {
				break
			}
		} else if errors.Is(err, unix.ENXIO) {
			_ = os.Remove(path) // no reader: its waiter is gone
		}
	}
	return fds
}

// ring wakes the waiters of the tickets open at fds and closes them. It
// reports false when every one of them left meanwhile (EPIPE). A full FIFO
// (EAGAIN) holds wakes its waiter has not read yet, which is as good.
func ring(fds []int) bool {
	rang := false
	for _, fd := range fds {
		_, err := unix.Write(fd, []byte{1})
		_ = unix.Close(fd)
		rang = rang || err == nil || errors.Is(err, unix.EAGAIN)
	}
	return rang
}

// wakeLine wakes the first live waiters in the line of the lock at base.
func wakeLine(base string) {
	for range 3 {
		fds := nextInLine(base)
		if len(fds) == 0 || ring(fds) {
			return
		}
	}
}

// bell rings a Mutex holder's line on release. It opens the first
// waiters' tickets while the lock is held (prepare, started at the grant),
// so that the path from the unlock to the next holder's attempt holds a
// write and no directory read. A waiter that joins later is behind those;
// when all of them leave meanwhile the writes fail, and the release reads
// the line again.
type bell struct {
	base string
	mu   sync.Mutex
	fds  []int // the first waiters' tickets, open for writing
	done bool  // rung: a prepare that ends later keeps nothing
}

func newBell(base string) *bell {
	b := &bell{base: base}
	go b.prepare()
	return b
}

func (b *bell) prepare() {
	fds := nextInLine(b.base)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return
	}
	b.fds = fds
}

// ring wakes the first waiters of the line; the lock is unlocked already.
func (b *bell) ring() {
	b.mu.Lock()
	fds := b.fds
	b.fds, b.done = nil, true
	b.mu.Unlock()
	if len(fds) > 0 && ring(fds) {
		return
	}
	wakeLine(b.base)
}
