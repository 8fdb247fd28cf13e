package filelock

import (
	"context"
	"sync"

	"github.com/distlock/distlock/core/kit"
)

// handle is a granted file lock. Its context ends with core.ErrReleased on
// Release, or with a cause matching core.ErrLockLost when the lock file is
// deleted or replaced under it (seen at once through the directory watcher
// on Linux, otherwise within the check interval) or when the Provider is
// closed.
type handle struct {
	*kit.BaseHandle
	p    *Provider
	name string
	key  string

	mu   sync.Mutex
	file *lockFile // nil once freed
}

// release is the BaseHandle's release: it unlocks the file and wakes this
// Provider's waiters at once; other processes' waiters wake through their
// watchers, and the front of a Mutex's line through their tickets.
func (h *handle) release(context.Context) error {
	h.p.untrack(h)
	err := h.free()
	h.p.wake(h.key)
	if err != nil {
		return kit.Wrap(backend, "release", h.name, err)
	}
	return nil
}

// free unlocks the file once; later calls do nothing.
func (h *handle) free() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.file == nil {
		return nil
	}
	err := h.file.release()
	h.file = nil
	return err
}

// check reports whether the lock file is still the one locked; see
// lockFile.check.
func (h *handle) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.file == nil {
		return nil
	}
	return h.file.check()
}
