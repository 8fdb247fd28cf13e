//go:build windows

package filelock

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

const oNoFollow = 0

// lockOffset is the byte that LockFileEx locks: far past any content, as
// SQLite does, because Windows locks are mandatory for I/O on the locked
// range and the start of a lock file holds its holder record, which the
// holder writes and Holder reads through other handles. Locking past the
// end of a file is allowed.
const lockOffset = 1 << 30

// lockRange is the overlapped structure naming lockOffset.
func lockRange() *windows.Overlapped { return &windows.Overlapped{Offset: lockOffset} }

// lockNB takes a shared or exclusive LockFileEx lock on the byte at
// lockOffset of f without waiting; it returns errLocked when another handle
// holds a conflicting lock. Windows drops the lock when the handle is closed
// or the process dies.
func lockNB(f *os.File, shared bool) error {
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if !shared {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	return lockFileEx(f, flags)
}

// openReadOnly opens an existing lock file read-only for Holder.
func openReadOnly(path string) (*os.File, error) { return os.Open(path) }

// openFile is os.OpenFile.
func openFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag, perm)
}

// unlock drops f's lock.
func unlock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var uerr error
	if err := rc.Control(func(fd uintptr) {
		uerr = windows.UnlockFileEx(windows.Handle(fd), 0, 1, 0, lockRange())
	}); err != nil {
		return err
	}
	return uerr
}

// lockWait takes an exclusive lock on f, waiting for it.
func lockWait(f *os.File) error { return lockFileEx(f, windows.LOCKFILE_EXCLUSIVE_LOCK) }

func lockFileEx(f *os.File, flags uint32) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	err = rc.Control(func(fd uintptr) {
		lerr = windows.LockFileEx(windows.Handle(fd), flags, 0, 1, 0, lockRange())
	})
	if err != nil {
		return err
	}
	if errors.Is(lerr, windows.ERROR_LOCK_VIOLATION) {
		return errLocked
	}
	if lerr != nil {
		return os.NewSyscallError("LockFileEx", lerr)
	}
	return nil
}

// badDir reports errors that mean the lock directory cannot hold lock files:
// a read-only file system, or a path component that is not a directory.
func badDir(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}
