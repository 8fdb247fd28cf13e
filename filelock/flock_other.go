//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || windows)

package filelock

import (
	"fmt"
	"os"
	"runtime"

	"github.com/distlock/distlock/core"
)

const oNoFollow = 0

func lockNB(*os.File, bool) error { return unsupported() }

func unlock(*os.File) error { return unsupported() }

func openReadOnly(path string) (*os.File, error) { return os.Open(path) }

// openFile is os.OpenFile.
func openFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag, perm)
}

func lockWait(*os.File) error { return unsupported() }

func unsupported() error {
	return fmt.Errorf("%w: file locks on %s", core.ErrUnsupported, runtime.GOOS)
}

func badDir(error) bool { return false }
