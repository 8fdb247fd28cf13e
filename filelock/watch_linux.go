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
//
// The mutex directory is watched without IN_CLOSE_WRITE: a Mutex's release
// rings the front of its line instead (line_linux.go), and waking every
// process on every release would cost more than the handover. The waiters
// at the front follow their lock file alone for it (followFile), to see a
// holder die.
type watcher struct {
	f      *os.File
	onKey  func(key string, moved bool) // moved: deleted, renamed or replaced
	onAll  func()
	mu     sync.Mutex
	byWD   map[int32]string
	byDir  map[string]int32
	files  map[int32]*followWatch  // watches of followed lock files
	follow map[string]*followWatch // the live one of each key
	done   chan struct{}
}

// followWatch is the watch of one lock file that the front waiters of its
// Mutex follow.
type followWatch struct {
	key string
	wd  int32
	n   int // followers
}

const watchMask = unix.IN_CLOSE_WRITE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// dirMask is the watch of the directory dir.
func dirMask(dir string) uint32 {
	if filepath.Base(dir) == mutexDir {
		return watchMask &^ unix.IN_CLOSE_WRITE
	}
	return watchMask
}

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
		f:      os.NewFile(uintptr(fd), "inotify"),
		onKey:  onKey,
		onAll:  onAll,
		byWD:   make(map[int32]string),
		byDir:  make(map[string]int32),
		files:  make(map[int32]*followWatch),
		follow: make(map[string]*followWatch),
		done:   make(chan struct{}),
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
	wd, err := w.addWatch(dir, dirMask(dir))
	if err != nil {
		return err
	}
	w.byWD[wd] = dir
	w.byDir[dir] = wd
	return nil
}

func (w *watcher) addWatch(path string, mask uint32) (int32, error) {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var wd int
	var werr error
	if err := rc.Control(func(fd uintptr) { wd, werr = unix.InotifyAddWatch(int(fd), path, mask) }); err != nil {
		return 0, err
	}
	if werr != nil {
		return 0, os.NewSyscallError("inotify_add_watch", werr)
	}
	return int32(wd), nil
}

func (w *watcher) rmWatch(wd int32) {
	if rc, err := w.f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.InotifyRmWatch(int(fd), uint32(wd)) })
	}
}

// followFile watches the lock file of key for the close of its holder's
// signal descriptor (a release, or the holder's death), until the returned
// watch is unfollowed as many times as it was followed. It returns nil when
// the file cannot be watched (or w is nil): the follower then sees a death
// on its backoff.
func (w *watcher) followFile(key string) *followWatch {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if fw := w.follow[key]; fw != nil {
		fw.n++
		return fw
	}
	wd, err := w.addWatch(key+".lock", unix.IN_CLOSE_WRITE|unix.IN_DONT_FOLLOW)
	if err != nil {
		return nil
	}
	if dir, ok := w.byWD[wd]; ok {
		// The path names a watched directory, whose mask the call just
		// replaced: put it back, and follow nothing.
		_, _ = w.addWatch(dir, dirMask(dir))
		return nil
	}
	if _, ok := w.files[wd]; ok {
		return nil // the file of another key (a hard link): not ours to follow
	}
	fw := &followWatch{key: key, wd: wd, n: 1}
	w.files[wd] = fw
	w.follow[key] = fw
	return fw
}

// watches reports whether fw still watches its file.
func (w *watcher) watches(fw *followWatch) bool {
	if w == nil || fw == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.files[fw.wd] == fw
}

func (w *watcher) unfollowFile(fw *followWatch) {
	if w == nil || fw == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if fw.n--; fw.n > 0 {
		return
	}
	if w.follow[fw.key] == fw {
		delete(w.follow, fw.key)
	}
	if w.files[fw.wd] == fw {
		delete(w.files, fw.wd)
		w.rmWatch(fw.wd)
	}
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
		case w.followed(wd, mask):
		case mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
			// The directory itself went away: forget it (a later wait
			// watches the new one) and let everyone re-check.
			if w.forget(wd, mask&unix.IN_MOVE_SELF != 0) {
				w.onAll()
			}
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

// followed handles an event of a followed lock file, and reports whether
// wd is one. A watch the kernel dropped (IN_IGNORED: the file was deleted)
// is forgotten, and the next follower watches the file now at the path.
func (w *watcher) followed(wd int32, mask uint32) bool {
	w.mu.Lock()
	fw, ok := w.files[wd]
	if ok && mask&unix.IN_IGNORED != 0 {
		delete(w.files, wd)
		if w.follow[fw.key] == fw {
			delete(w.follow, fw.key)
		}
	}
	w.mu.Unlock()
	if ok {
		w.onKey(fw.key, false)
	}
	return ok
}

// forget drops the watch wd of a directory, and reports whether it was
// one (not the late IN_IGNORED of a lock file no longer followed).
func (w *watcher) forget(wd int32, remove bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	dir, ok := w.byWD[wd]
	if !ok {
		return false
	}
	delete(w.byWD, wd)
	delete(w.byDir, dir)
	if remove {
		w.rmWatch(wd)
	}
	return true
}
