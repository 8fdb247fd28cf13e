package filelock

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
)

// nextFence increments the fencing counter kept in the sidecar file at path
// (<safe name>.ctr) and returns the new value (1 for a new file). The
// read-modify-write runs under an exclusive lock on the sidecar, so
// concurrent grants, from any process, get distinct and increasing tokens.
//
// The counter is decimal text ending in a newline, readable with cat. It
// only grows, so writing it in place never leaves a longer old value behind.
// Sidecars are never removed: the counter must outlive the lock file.
// Deleting one restarts its tokens at 1.
func nextFence(path string) (uint64, error) {
	f, err := openLockFile(path, os.O_RDWR)
	if err != nil {
		return 0, err
	}
	defer f.Close() // also unlocks
	if err := lockWait(f); err != nil {
		return 0, err
	}
	var buf [32]byte
	// One read from the start, where the descriptor is: the counter is
	// far shorter than the buffer.
	n, err := f.Read(buf[:])
	if err != nil && err != io.EOF {
		return 0, err
	}
	var last uint64
	if text := bytes.TrimSpace(buf[:n]); len(text) > 0 {
		last, err = strconv.ParseUint(string(text), 10, 64)
		if err != nil {
			// Never guess: restarting the count would hand out tokens
			// that are not greater than ones already granted.
			return 0, fmt.Errorf("corrupt fencing counter %s: %w", path, err)
		}
	}
	if last == ^uint64(0) {
		return 0, fmt.Errorf("fencing counter %s is exhausted", path)
	}
	next := last + 1
	out := append(strconv.AppendUint(buf[:0], next, 10), '\n')
	if _, err := f.WriteAt(out, 0); err != nil {
		return 0, err
	}
	return next, nil
}
