//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package filelock

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const oNoFollow = unix.O_NOFOLLOW

// lockNB takes a shared or exclusive flock(2) on f without waiting; it
// returns errLocked when another open file description holds a conflicting
// lock. flock locks belong to the open file description, so two descriptors
// of the same process conflict like two processes do, and the kernel drops
// the lock when the process dies.
func lockNB(f *os.File, shared bool) error {
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	return flock(f, how|unix.LOCK_NB)
}

// openFile opens a regular file with open(2) and one fcntl: os.OpenFile
// would add four more system calls trying to register it with the poller,
// and an acquire opens up to three files.
func openFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, flag|unix.O_CLOEXEC, uint32(perm))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openReadOnly opens an existing lock file read-only for Holder.
func openReadOnly(path string) (*os.File, error) {
	return openFile(path, os.O_RDONLY|oNoFollow, 0)
}

// unlock drops f's lock.
func unlock(f *os.File) error { return flock(f, unix.LOCK_UN) }

// lockWait takes an exclusive flock on f, waiting for it.
func lockWait(f *os.File) error { return flock(f, unix.LOCK_EX) }

func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Flock(int(fd), how)
			if ferr != unix.EINTR {
				break
			}
		}
	})
	if err != nil {
		return err
	}
	switch {
	case errors.Is(ferr, unix.EWOULDBLOCK):
		return errLocked
	case errors.Is(ferr, unix.EBADF):
		// NFS emulates flock with POSIX locks, which need write access
		// for an exclusive lock.
		return errNeedWrite
	}
	if ferr != nil {
		return os.NewSyscallError("flock", ferr)
	}
	return nil
}

// badDir reports errors that mean the lock directory cannot hold lock files:
// a read-only file system, or a path component that is not a directory.
func badDir(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}
