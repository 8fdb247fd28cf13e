//go:build linux

package filelock

import (
	"bytes"
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

// A Mutex's waiters line up across the processes of a host. A waiter whose
// first attempt fails takes a ticket: a FIFO in <base>.line/, named by its
// arrival time, that the waiter keeps open for reading and writing while it
// waits. A ticket appears under its name only once it is open (it is made
// under another name and renamed), so a ticket that cannot be opened for
// writing without a reader (ENXIO) is a dead waiter's, and whoever finds one
// deletes it.
//
// Two bytes travel on a ticket. ringTry, from a release (or a waiter that
// gives up), says the lock may be free: the waiter tries it. ringLead, from
// a new holder, says the waiter is at the front: it follows the lock file
// through the watcher, so that the death of the holder, which rings no
// one, wakes it at once. A release rings the first rings live tickets. The
// line only decides whom a release wakes; flock alone decides who holds
// the lock.

// lineSuffix ends the name of a Mutex's line directory, beside its files.
const lineSuffix = ".line"

// rings is how many waiters at the front of a line a release wakes: the
// first to run takes the lock, and the others keep their places.
const rings = 2

const (
	ringTry  = 'R'
	ringLead = 'L'
)

// ticket is a waiter's place in a line.
type ticket struct {
	path string
	f    *os.File // read end, in the runtime poller; held open while waiting
	done chan struct{}
}

// name is the ticket's name in its line, which a grant of its own waiter
// skips when it rings the front.
func (t *ticket) name() string { return filepath.Base(t.path) }

// takeTicket joins the line of the lock at base, and reports whether the
// ticket is at the front (fewer than rings live tickets ahead of it). woken
// is called from the ticket's goroutine for each batch of bytes, with try
// set when one of them was ringTry.
func takeTicket(base string, woken func(try bool)) (*ticket, bool, error) {
	dir := base + lineSuffix
	d, err := openLineDir(dir, true)
	if err != nil {
		return nil, false, err
	}
	defer d.Close()
	dfd := int(d.Fd())
	name := ticketName(time.Now())
	f, err := makeTicket(dfd, dir, name)
	if err != nil {
		return nil, false, err
	}
	t := &ticket{path: f.Name(), f: f, done: make(chan struct{})}
	go t.listen(woken)
	names, err := readLine(d)
	if err != nil {
		return t, false, nil // not at the front, as far as we know: poll
	}
	ahead := names[:max(0, slices.Index(names, name))]
	live, _ := liveTickets(dfd, ahead, "", rings, false)
	return t, live < rings, nil
}

// makeTicket makes the FIFO of a ticket under a name that is not a
// ticket's, opens it for reading and writing (a FIFO with no writer reads
// as end of file at once, so the ticket is its own writer and its reads
// block), and renames it into the line.
func makeTicket(dfd int, dir, name string) (*os.File, error) {
	tmp := "." + name
	if err := unix.Mkfifoat(dfd, tmp, filePerm); err != nil {
		return nil, &fs.PathError{Op: "mkfifo", Path: filepath.Join(dir, tmp), Err: err}
	}
	fd, err := unix.Openat(dfd, tmp, unix.O_RDWR|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		if err = unix.Renameat(dfd, tmp, dfd, name); err != nil {
			_ = unix.Close(fd)
		}
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(dir, tmp), Err: err}
	}
	// Non-blocking: the runtime poller parks the reader, and Close wakes it.
	return os.NewFile(uintptr(fd), filepath.Join(dir, name)), nil
}

func (t *ticket) listen(woken func(try bool)) {
	defer close(t.done)
	var b [64]byte
	for {
		n, err := t.f.Read(b[:])
		if err != nil {
			return // closed
		}
		woken(bytes.IndexByte(b[:n], ringTry) >= 0)
	}
}

// unlink takes t out of its line: no one rings it after this.
func (t *ticket) unlink() { _ = os.Remove(t.path) }

// close stops t's goroutine, once t is unlinked.
func (t *ticket) close() {
	_ = t.f.Close()
	<-t.done
}

// openLineDir opens a line directory, creating it when create is set. A
// symbolic link in its place is not followed.
func openLineDir(dir string, create bool) (*os.File, error) {
	const flag = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW
	d, err := openFile(dir, flag, 0)
	if create && errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, dirPerm); err != nil {
			return nil, err
		}
		d, err = openFile(dir, flag, 0)
	}
	return d, err
}

// readLine lists the tickets of the open line directory d, earliest first:
// FIFOs named as takeTicket names them. Anything else is ignored.
func readLine(d *os.File) ([]string, error) {
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

// liveTickets finds up to n of the tickets names (in order) of the line
// open at dfd whose waiters are alive, skipping skip and deleting dead
// waiters' tickets on the way, and returns how many it found and, with
// keep, their descriptors. A ticket's waiter is alive when the ticket opens
// for writing without waiting (else ENXIO: no one has it open for
// reading). A kept ticket is opened for reading and writing, so a later
// write does not fail, nor raise SIGPIPE, if its waiter leaves meanwhile.
func liveTickets(dfd int, names []string, skip string, n int, keep bool) (live int, fds []int) {
	for _, name := range names {
		if live == n {
			break
		}
		if name == skip {
			continue
		}
		fd, err := openTicket(dfd, name, unix.O_WRONLY)
		if errors.Is(err, unix.ENXIO) {
			_ = unix.Unlinkat(dfd, name, 0)
		}
		if err != nil {
			continue
		}
		live++
		if keep {
			if rw, err := openTicket(dfd, name, unix.O_RDWR); err == nil {
				fds = append(fds, rw)
			}
		}
		_ = unix.Close(fd)
	}
	return live, fds
}

// openTicket opens a ticket without waiting and checks it is a FIFO (it may
// have been replaced since the directory was read).
func openTicket(dfd int, name string, flag int) (int, error) {
	fd, err := unix.Openat(dfd, name, flag|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
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

// front opens the first live tickets of the line of the lock at base, up
// to rings of them and skipping skip, for reading and writing.
func front(base, skip string) []int {
	d, err := openLineDir(base+lineSuffix, false)
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := readLine(d)
	_, fds := liveTickets(int(d.Fd()), names, skip, rings, true)
	return fds
}

// send writes b to each ticket open at fds and closes them. A full FIFO
// (EAGAIN) holds bytes its waiter has not read yet, which is as good.
func send(fds []int, b byte) {
	for _, fd := range fds {
		_, _ = unix.Write(fd, []byte{b})
	}
	closeAll(fds)
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// wakeLine rings the front of the line of the lock at base.
func wakeLine(base string) { send(front(base, ""), ringTry) }

// bell rings a Mutex holder's line on release. At the grant (prepare, in
// a goroutine) it opens the front of the line, skipping the new holder's
// own ticket, and tells those waiters they are at the front; the release
// then only writes to them. A waiter that joins later is behind them, or
// finds itself at the front and follows the lock file on its own. A line
// that was empty at the grant is read again at the release.
type bell struct {
	base, skip string
	mu         sync.Mutex
	fds        []int
	ready      bool // prepare has opened fds
	done       bool // rung: a prepare that ends later keeps nothing
}

func newBell(base, skip string) *bell {
	b := &bell{base: base, skip: skip}
	go b.prepare()
	return b
}

func (b *bell) prepare() {
	fds := front(b.base, b.skip)
	for _, fd := range fds {
		_, _ = unix.Write(fd, []byte{ringLead})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		closeAll(fds)
		return
	}
	b.fds, b.ready = fds, true
}

// ring wakes the front of the line; the lock is unlocked already.
func (b *bell) ring() {
	b.mu.Lock()
	fds, ready := b.fds, b.ready
	b.fds, b.done = nil, true
	b.mu.Unlock()
	if !ready || len(fds) == 0 {
		wakeLine(b.base)
		return
	}
	send(fds, ringTry)
}
