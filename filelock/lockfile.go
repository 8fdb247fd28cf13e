package filelock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/distlock/distlock/core"
)

const (
	filePerm = 0o666 // before umask, as os.Create
	dirPerm  = 0o777 // before umask, as os.MkdirAll callers usually pass
)

// errBusy is what tryLock returns when another descriptor holds a
// conflicting lock on the file.
var errBusy = errors.New("lock file is locked")

// errLocked reports a conflicting lock from the platform's lock call.
var errLocked = errors.New("locked")

// errNeedWrite reports a file system whose locks need a descriptor open for
// writing: NFS, which emulates flock with byte-range locks. Attempts there
// would have to open lock files for writing, and then every failed attempt
// would wake every waiter.
var errNeedWrite = fmt.Errorf("%w: this file system's locks need writable descriptors (NFS?): use a local directory", core.ErrUnsupported)

// lockFile is a lock held on one file: an open descriptor with a flock (or,
// on Windows, LockFileEx) lock, and the identity of the file it locked.
type lockFile struct {
	f    *os.File
	path string
	info os.FileInfo // of the locked descriptor
	// signal is a second descriptor, open for writing, that the holder
	// keeps while it holds the lock. Closing it, on release or when the
	// process dies, is the IN_CLOSE_WRITE event that wakes waiters in
	// every process. Attempts open lock files read-only, so a failed
	// attempt wakes nobody. A Mutex holder or RWMutex writer also writes
	// its holder record through it (see inspector.go).
	signal *os.File
	// recorded is set once a holder record was written: release clears it
	// before unlocking.
	recorded bool
	// bell rings the front of a Mutex's line on release (line_linux.go);
	// nil for the other kinds.
	bell *bell
}

// tryLock opens path, creating it (and its directory) if needed, and takes a
// shared or exclusive lock without waiting. It returns errBusy when the lock
// conflicts with another holder's. When signal is set, the holder's release
// wakes other processes' waiters (see lockFile.signal).
//
// Lock files stay in place after release and are reused. If one is deleted
// or replaced all the same (by an operator or a cleanup job), an attempt may
// lock a file that no longer has a name; so after locking, tryLock checks
// that the path still refers to the file it locked and, if not, tries again
// on the new file.
func (p *Provider) tryLock(path string, shared, signal bool) (*lockFile, error) {
	for range 16 {
		f, err := openLockFile(path, os.O_RDONLY)
		if err != nil {
			return nil, err
		}
		if p.hookAfterOpen != nil {
			p.hookAfterOpen(path)
		}
		if err := lockNB(f, shared); err != nil {
			f.Close()
			if errors.Is(err, errLocked) {
				return nil, errBusy
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		pi, err := os.Stat(path)
		if err == nil && os.SameFile(fi, pi) {
			lf := &lockFile{f: f, path: path, info: fi}
			if signal {
				// Without it, waiters elsewhere notice the release on
				// their backoff: not worth failing the grant over.
				lf.signal, _ = openFile(path, os.O_WRONLY|oNoFollow, 0)
			}
			return lf, nil
		}
		f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		// The file was deleted or replaced between our open and our lock:
		// a fresh one is, or will be, at path. Try that one.
	}
	// Something keeps replacing the file. Report busy so the caller waits
	// and tries again.
	return nil, errBusy
}

// openLockFile opens path, creating it, and the directory that holds it, on
// demand.
func openLockFile(path string, flag int) (*os.File, error) {
	// O_NOFOLLOW: a symbolic link planted in the directory must not make
	// us create or write a file elsewhere.
	flag |= os.O_CREATE | oNoFollow
	f, err := openFile(path, flag, filePerm)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
			return nil, err
		}
		f, err = openFile(path, flag, filePerm)
	}
	return f, err
}

// clearStale empties a lock file that still holds the record of a holder
// that died without releasing, so that Holder stops naming it, and reports
// whether the file can take this holder's record: it is empty and open for
// writing. The size is that of the locked descriptor, read after locking,
// and only a holder writes the file.
func (l *lockFile) clearStale() bool {
	if l.signal == nil {
		return false
	}
	return l.info.Size() == 0 || l.signal.Truncate(0) == nil
}

// writeHolder writes the holder record, "<id>\n<token>\n", into the empty
// lock file with one write. It is best effort: a holder whose record could
// not be written still holds the lock, and Holder reports the lock free.
// Writing is IN_MODIFY, which wakes nobody.
func (l *lockFile) writeHolder(id string, token uint64) {
	rec := make([]byte, 0, len(id)+22)
	rec = append(append(rec, id...), '\n')
	rec = append(strconv.AppendUint(rec, token, 10), '\n')
	l.recorded = true
	_, _ = l.signal.WriteAt(rec, 0)
}

// release clears the holder record, unlocks the file, then signals waiters:
// those of every process through the signal descriptor, and the front of a
// Mutex's line through their tickets.
// The file stays for the next holder.
func (l *lockFile) release() error {
	if l.recorded {
		// While still locked: a record in a file that is not locked is
		// then always a dead holder's. If this fails, Holder's probe
		// still sees the lock free.
		_ = l.signal.Truncate(0)
	}
	err := l.f.Close()
	if l.bell != nil {
		l.bell.ring()
	}
	if l.signal != nil {
		_ = l.signal.Close()
	}
	if err != nil {
		return fmt.Errorf("unlock %s: %w", l.path, err)
	}
	return nil
}

// check returns an error matching core.ErrLockLost when the path no longer
// refers to the locked file, nil when it does, and the stat error when it
// cannot tell.
func (l *lockFile) check() error {
	pi, err := os.Stat(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: lock file %s was deleted", core.ErrLockLost, l.path)
	case err != nil:
		return err
	case !os.SameFile(pi, l.info):
		return fmt.Errorf("%w: lock file %s was replaced", core.ErrLockLost, l.path)
	}
	return nil
}

// classify maps a file-system error that a caller can only fix by choosing
// another directory (no permission, read-only file system, a path component
// that is not a directory) to core.ErrInvalidArgument, keeping the OS error
// in the chain. Other errors are returned as they are.
func classify(err error) error {
	switch {
	case err == nil, errors.Is(err, core.ErrInvalidArgument):
		return err
	case errors.Is(err, fs.ErrPermission), badDir(err):
		return fmt.Errorf("%w: %w", core.ErrInvalidArgument, err)
	}
	return err
}
