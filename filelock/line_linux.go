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
// arrival time on the host's monotonic clock, that the waiter keeps open for
// reading and writing while it waits. A ticket appears under its name only
// once it is open (it is made under a temporary name and renamed), so a
// ticket that cannot be opened for writing without a reader (ENXIO) is a
// dead waiter's, and whoever finds one deletes it. A waiter takes its
// ticket out of the line as soon as it has the lock.
//
// Two bytes travel on a ticket. ringTry, from a release (or a waiter that
// gives up), says the lock may be free: the waiter tries it. ringLead, from
// a new holder, says the waiter is at the front: it follows the lock file
// through the watcher, so that the death of the holder, which rings no
// one, wakes it at once. A release rings the first rings live tickets. The
// line only decides whom a release wakes; flock alone decides who holds
// the lock.

// lines: a Mutex's waiters line up on this platform.
const lines = true

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
	path     string
	f        *os.File // read end, in the runtime poller; held open while waiting
	done     chan struct{}
	unlinked bool // used by the waiter's goroutine only
}

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
	name := ticketName(monotonic())
	f, err := makeTicket(dfd, dir, name)
	if err != nil {
		return nil, false, err
	}
	t := &ticket{path: f.Name(), f: f, done: make(chan struct{})}
	go t.listen(woken)
	names, err := readLine(d, dfd)
	if err != nil {
		return t, false, nil // not at the front, as far as we know: poll
	}
	ahead := names[:max(0, slices.Index(names, name))]
	return t, len(liveTickets(dfd, ahead, rings, false)) < rings, nil
}

// makeTicket makes the FIFO of a ticket under a temporary name, opens it
// for reading and writing (a FIFO with no writer reads as end of file at
// once, so the ticket is its own writer and its reads block), and renames
// it into the line.
func makeTicket(dfd int, dir, name string) (*os.File, error) {
	tmp := "." + name
	if err := unix.Mkfifoat(dfd, tmp, filePerm); err != nil {
		return nil, &fs.PathError{Op: "mkfifo", Path: filepath.Join(dir, tmp), Err: err}
	}
	fd, err := openTicket(dfd, tmp, unix.O_RDWR)
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

// unlink takes t out of its line, once: no one rings it after this. A nil
// ticket is fine.
func (t *ticket) unlink() {
	if t != nil && !t.unlinked {
		t.unlinked = true
		_ = os.Remove(t.path)
	}
}

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

// readLine lists the tickets of the open line directory d (dfd its
// descriptor), earliest first: FIFOs named as takeTicket names them.
// Anything else is ignored, but for the temporary FIFO of a ticket whose
// process died before renaming it, which it deletes after a minute.
func readLine(d *os.File, dfd int) ([]string, error) {
	entries, err := d.ReadDir(-1)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type() != fs.ModeNamedPipe {
			continue
		}
		switch name := e.Name(); {
		case isTicket(name):
			names = append(names, name)
		case name[0] == '.' && isTicket(name[1:]) && name[1:] < ticketName(monotonic()-int64(time.Minute)):
			_ = unix.Unlinkat(dfd, name, 0)
		}
	}
	slices.Sort(names)
	return names, err
}

// ticketName is the name of a ticket taken at ns on the monotonic clock:
// 16 hex digits, so names sort by arrival, and 8 random ones.
func ticketName(ns int64) string {
	return fmt.Sprintf("%016x-%08x", ns, rand.Uint32())
}

// monotonic reads CLOCK_MONOTONIC, which every process of a host shares and
// no clock step moves.
func monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
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

// liveTickets opens for writing, without waiting, up to n of the tickets
// names (in order) of the line open at dfd whose waiters are alive,
// deleting dead waiters' tickets on the way (ENXIO: no one has the ticket
// open for reading). Without keep it closes them again, and only their
// number counts.
func liveTickets(dfd int, names []string, n int, keep bool) []int {
	var fds []int
	for _, name := range names {
		if len(fds) == n {
			break
		}
		fd, err := openTicket(dfd, name, unix.O_WRONLY)
		if errors.Is(err, unix.ENXIO) {
			_ = unix.Unlinkat(dfd, name, 0)
		}
		if err == nil {
			fds = append(fds, fd)
		}
	}
	if !keep {
		closeAll(fds)
	}
	return fds
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

// front opens the first live tickets of the line of the lock at base for
// writing, up to rings of them.
func front(base string) []int {
	d, err := openLineDir(base+lineSuffix, false)
	if err != nil {
		return nil
	}
	defer d.Close()
	dfd := int(d.Fd())
	names, _ := readLine(d, dfd)
	return liveTickets(dfd, names, rings, true)
}

// send writes b to each ticket open at fds and closes them. It reports
// whether one of them took it. A full FIFO (EAGAIN) holds bytes its waiter
// has not read yet, which is as good.
func send(fds []int, b byte) bool {
	took := false
	for _, fd := range fds {
		took = writeTicket(fd, b) || took
	}
	closeAll(fds)
	return took
}

// writeTicket writes b to the ticket open at fd, unless its waiter left
// (no reader: POLLERR). Looking first keeps the write from raising
// SIGPIPE, which a program that asked for it with signal.Notify would
// receive; a waiter that leaves in between still can.
func writeTicket(fd int, b byte) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	if n, err := unix.Poll(pfd, 0); err == nil && n == 1 && pfd[0].Revents&unix.POLLERR != 0 {
		return false
	}
	_, err := unix.Write(fd, []byte{b})
	return err == nil || errors.Is(err, unix.EAGAIN)
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// wakeLine rings the front of the line of the lock at base.
func wakeLine(base string) {
	for range 3 {
		if fds := front(base); len(fds) == 0 || send(fds, ringTry) {
			return
		}
	}
}

// bell rings a Mutex holder's line on release. At the grant (prepare, in a
// goroutine) it opens the front of the line and tells those waiters they
// are there; the release then only writes to them. A waiter that joins
// later is behind them, or finds itself at the front and follows the lock
// file on its own. A line that was empty at the grant, or whose front all
// left meanwhile, is read again at the release.
type bell struct {
	base  string
	mu    sync.Mutex
	fds   []int
	ready bool // prepare has opened fds
	done  bool // rung: a prepare that ends later keeps nothing
}

func newBell(base string) *bell {
	b := &bell{base: base}
	go b.prepare()
	return b
}

func (b *bell) prepare() {
	fds := front(b.base)
	for _, fd := range fds {
		writeTicket(fd, ringLead)
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
	if !ready || !send(fds, ringTry) {
		wakeLine(b.base)
	}
}
