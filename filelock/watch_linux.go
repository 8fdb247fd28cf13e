//go:build linux

package filelock

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// watcher reports changes to lock files through inotify. It watches
// directories, so that it also sees lock files being deleted or replaced.
//
// A release is the close of the holder's signal descriptor, the only
// descriptor of a lock file ever open for writing (IN_CLOSE_WRITE); the
// kernel closes it too when the holder dies, so waiters wake on abandonment
// as well. Attempts open lock files read-only, so a failed attempt wakes
// nobody and waiters cannot spin waking each other. A lock file deleted or
// replaced (IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO) makes its holders lost.
// Fencing counter files (.ctr) are ignored.
//
// One inotify descriptor and one goroutine serve a whole Provider, with one
// watch per kind directory (mutex, rwmutex, semaphore), counted against
// fs.inotify.max_user_watches. When a watch cannot be added, waiters poll.
type watcher struct {
	f     *os.File
	onKey func(key string, moved bool) // moved: deleted, renamed or replaced
	onAll func()
	mu    sync.Mutex
	byWD  map[int32]string
	byDir map[string]int32
	done  chan struct{}
}

const watchMask = unix.IN_CLOSE_WRITE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// newWatcher starts a watcher, or returns nil (waiters poll) when inotify is
// not available.
func newWatcher(onKey func(key string, moved bool), onAll func()) *watcher {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	w := &watcher{
		// A non-blocking descriptor goes to the runtime poller, so Read
		// parks the goroutine and Close wakes it.
		f:     os.NewFile(uintptr(fd), "inotify"),
		onKey: onKey,
		onAll: onAll,
		byWD:  make(map[int32]string),
		byDir: make(map[string]int32),
		done:  make(chan struct{}),
	}
	go w.run()
	return w
}

func (w *watcher) watching(dir string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.byDir[dir]
	return ok
}

// add watches dir. It is a no-op when dir is watched already.
func (w *watcher) add(dir string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.byDir[dir]; ok {
		return nil
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var wd int
	var werr error
	if err := rc.Control(func(fd uintptr) { wd, werr = unix.InotifyAddWatch(int(fd), dir, watchMask) }); err != nil {
		return err
	}
	if werr != nil {
		return os.NewSyscallError("inotify_add_watch", werr)
	}
	w.byWD[int32(wd)] = dir
	w.byDir[dir] = int32(wd)
	return nil
}

// close stops the watcher and waits for its goroutine. A nil watcher is
// fine.
func (w *watcher) close() {
	if w == nil {
		return
	}
	w.f.Close()
	<-w.done
}

func (w *watcher) run() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				// Unexpected: wake everyone so nobody waits for an
				// event that will not come, then stop (waiters poll).
				w.onAll()
			}
			return
		}
		w.dispatch(buf[:n])
	}
}

// dispatch decodes a batch of struct inotify_event records.
func (w *watcher) dispatch(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		nameLen := int(binary.NativeEndian.Uint32(b[12:]))
		end := min(unix.SizeofInotifyEvent+nameLen, len(b))
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:end]), "\x00")
		b = b[end:]

		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			w.onAll()
		case mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
			// The directory itself went away: forget it (a later wait
			// watches the new one) and let everyone re-check.
			w.forget(wd, mask&unix.IN_MOVE_SELF != 0)
			w.onAll()
		default:
			w.mu.Lock()
			dir, ok := w.byWD[wd]
			w.mu.Unlock()
			if !ok || name == "" || strings.HasSuffix(name, ".ctr") {
				continue
			}
			// A lock's files share its stem, and its key is the path of
			// the stem.
			stem, _, _ := strings.Cut(name, ".")
			w.onKey(filepath.Join(dir, stem), mask&unix.IN_CLOSE_WRITE == 0)
		}
	}
}

func (w *watcher) forget(wd int32, remove bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	dir, ok := w.byWD[wd]
	if !ok {
		return
	}
	delete(w.byWD, wd)
	delete(w.byDir, dir)
	if remove {
		if rc, err := w.f.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { _, _ = unix.InotifyRmWatch(int(fd), uint32(wd)) })
		}
	}
}
