package filelock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// backend is the name errors carry in core.Error.Backend.
const backend = "file"

// Directory layout under the Provider's directory. Each kind of lock has its
// own subdirectory, so a mutex, a reader-writer lock and a semaphore with the
// same name are distinct locks.
const (
	mutexDir     = "mutex"
	rwmutexDir   = "rwmutex"
	semaphoreDir = "semaphore"
)

// MaxSemaphore is the largest max a Semaphore accepts. Each slot is a file,
// and an attempt on a full semaphore tries every slot.
const MaxSemaphore = 1024

// errClosed is why acquires fail, and held handles are lost, once the
// Provider is closed.
var errClosed = errors.New("filelock: provider closed")

// Provider makes file locks in one directory. Every process that opens a
// Provider on the same directory (on the same host, or on a shared file
// system whose flock is coherent) sees the same locks.
//
// A Provider is safe for concurrent use. Close it when done: Close stops its
// watcher and checker goroutines and releases every lock still held through
// it.
type Provider struct {
	dir      string
	id       string // recorded in lock files for Holder
	backoff  kit.Backoff
	now      func() time.Time // the clock of membership expiry
	notifier kit.Notifier
	keeper   *kit.Keeper
	watcher  *watcher
	probe    *kit.Probe // nil without observers

	// hookAfterOpen, when set (by tests), runs between opening a lock file
	// and locking it: the window in which a deleted file gets locked.
	hookAfterOpen func(path string)

	waits atomic.Uint64 // numbers the Mutex waits in a line

	mu     sync.Mutex
	closed bool
	held   map[string]map[*handle]struct{}    // by lock key
	heads  map[string]map[string]*followWatch // lock key → its line's front waiters here (line.go)
}

var _ core.Provider = (*Provider)(nil)

// New returns a Provider that keeps its lock files in dir. The directory
// (and its parents) is created on the first acquire if it does not exist.
//
// New fails with an error matching core.ErrInvalidArgument when dir is empty,
// when dir exists but is not a directory, or when an option is out of range.
// A directory that cannot be written is reported by the acquire calls, which
// name the lock.
func New(dir string, opts ...Option) (*Provider, error) {
	if dir == "" {
		return nil, kit.Invalid("filelock: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: filelock: directory %q: %w", core.ErrInvalidArgument, dir, err)
	}
	switch fi, err := os.Stat(abs); {
	case err == nil && !fi.IsDir():
		return nil, kit.Invalid("filelock: %q is not a directory", abs)
	case err != nil && errors.Is(classify(err), core.ErrInvalidArgument):
		// A parent is a file, or cannot be searched.
		return nil, fmt.Errorf("filelock: directory %q: %w", abs, classify(err))
	}
	o := defaults()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	p := &Provider{
		dir:     abs,
		id:      o.identity,
		backoff: o.backoff,
		now:     time.Now,
		held:    make(map[string]map[*handle]struct{}),
		heads:   make(map[string]map[string]*followWatch),
		probe:   kit.NewProbe(backend, o.log, o.observers...),
	}
	p.keeper, err = kit.NewKeeper(kit.KeeperConfig{
		Interval: o.checkInterval,
		Renew:    p.recheck,
	})
	if err != nil {
		return nil, err
	}
	if o.notify {
		p.watcher = newWatcher(p.onChange, p.onChangeAll)
	}
	return p, nil
}

// Dir returns the absolute path of the directory that holds the lock files.
func (p *Provider) Dir() string { return p.dir }

// Mutex returns the exclusive lock called name. It does no I/O; an invalid
// name is reported by the acquire calls.
func (p *Provider) Mutex(name string) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	return p.probe.Mutex(&mutex{p: p, name: name, base: p.base(mutexDir, name)})
}

// RWMutex returns the reader-writer lock called name: many readers at once
// or one writer, and a waiting writer keeps new readers out. It does no I/O;
// an invalid name is reported by the acquire calls.
func (p *Provider) RWMutex(name string) core.RWLocker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedRWLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	return p.probe.RWMutex(&rwmutex{p: p, name: name, base: p.base(rwmutexDir, name)})
}

// Semaphore returns the semaphore called name, which admits at most max
// holders at once. Every user of the name must pass the same max. It does no
// I/O; an invalid name, or max outside [1, MaxSemaphore], is reported by the
// acquire calls.
func (p *Provider) Semaphore(name string, max int) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	if max < 1 || max > MaxSemaphore {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name,
			kit.Invalid("semaphore max %d is outside [1, %d]", max, MaxSemaphore)))
	}
	return p.probe.Semaphore(&semaphore{p: p, name: name, base: p.base(semaphoreDir, name), max: max})
}

// Close releases every lock still held through p (their handles' contexts
// end with a cause matching core.ErrLockLost), stops p's goroutines and
// waits for them. Acquires made after Close fail; waiting ones return. Close
// is idempotent.
func (p *Provider) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var held []*handle
	for _, set := range p.held {
		for h := range set {
			held = append(held, h)
		}
	}
	clear(p.held)
	p.mu.Unlock()

	var errs []error
	for _, h := range held {
		h.Lose(errClosed)
		if err := h.free(); err != nil {
			errs = append(errs, kit.Wrap(backend, "close", h.name, err))
		}
		p.wake(h.key)
	}
	p.keeper.Close()
	p.watcher.close()
	p.notifier.NotifyAll()
	return errors.Join(errs...)
}

// base returns the path, without extension, of the files of the lock of the
// given kind called name. It is also the lock's key in the notifier and the
// held set. fileStem keeps it inside p.dir whatever name holds.
func (p *Provider) base(kind, name string) string {
	return filepath.Join(p.dir, kind, fileStem(name))
}

// begin starts an acquire call: it checks the context and the Provider.
func (p *Provider) begin(ctx context.Context, name string) error {
	if ctx == nil {
		return kit.Wrap(backend, "acquire", name, kit.Invalid("nil context"))
	}
	if ctx.Err() != nil {
		return kit.Wrap(backend, "acquire", name, kit.NotAcquired(ctx))
	}
	return p.usable(name)
}

func (p *Provider) usable(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return kit.Wrap(backend, "acquire", name, fmt.Errorf("%w: %w", core.ErrInvalidArgument, errClosed))
	}
	return nil
}

// wait runs try until it grants the lock, fails, or ctx ends. Releases of
// the lock key wake it at once: from this Provider directly, from other
// processes through the directory watcher. With fair, waiters that keep
// losing the race get priority (see priority).
func (p *Provider) wait(ctx context.Context, name, key string, fair bool, try kit.Attempt) (core.Handle, error) {
	p.watch(filepath.Dir(key))
	wake, stop := p.notifier.Subscribe(key)
	defer stop()
	if fair {
		pr := priority{path: key + ".prio"}
		defer pr.done()
		try = pr.wrap(try)
	}
	h, err := kit.Wait(ctx, p.backoff, wake, try)
	if err != nil {
		return nil, kit.Wrap(backend, "acquire", name, err)
	}
	return h, nil
}

// watch makes sure dir is watched for releases, creating it if needed so
// the watch can be placed before the first attempt. Failures are ignored:
// waiters then fall back to polling, and the attempt reports real errors.
func (p *Provider) watch(dir string) {
	if p.watcher == nil || p.watcher.watching(dir) {
		return
	}
	if err := p.watcher.add(dir); errors.Is(err, fs.ErrNotExist) {
		if os.MkdirAll(dir, dirPerm) == nil {
			_ = p.watcher.add(dir)
		}
	}
}

// grant turns a locked file into a handle: it takes the next fencing token
// and starts watching the file for loss. With record, for an exclusive
// holder that Holder reports, it writes the holder record into the lock
// file (see inspector.go). On failure it unlocks the file.
func (p *Provider) grant(name, key string, lf *lockFile, record bool) (core.Handle, time.Duration, error) {
	// Clear a dead holder's record first, so Holder stops naming it as
	// soon as it can.
	record = record && lf.clearStale()
	token, err := nextFence(key + ".ctr")
	if err != nil {
		_ = lf.release()
		return nil, 0, kit.Wrap(backend, "acquire", name, fmt.Errorf("fencing counter: %w", classify(err)))
	}
	if record {
		lf.writeHolder(p.id, token)
	}
	start := time.Now()
	h := &handle{p: p, name: name, key: key, file: lf}
	h.BaseHandle = kit.NewHandle(token, h.release)

	p.watch(filepath.Dir(key))
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = h.free()
		return nil, 0, kit.Wrap(backend, "acquire", name, fmt.Errorf("%w: %w", core.ErrInvalidArgument, errClosed))
	}
	set := p.held[key]
	if set == nil {
		set = make(map[*handle]struct{})
		p.held[key] = set
	}
	set[h] = struct{}{}
	p.mu.Unlock()
	p.keeper.Keep(h.BaseHandle, start, h)
	return h, 0, nil
}

func (p *Provider) untrack(h *handle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if set := p.held[h.key]; set != nil {
		delete(set, h)
		if len(set) == 0 {
			delete(p.held, h.key)
		}
	}
}

// recheck is the Keeper's periodic check that held lock files are still in
// place, for file systems and platforms without change notification.
func (p *Provider) recheck(_ context.Context, batch []*kit.Lease) []error {
	errs := make([]error, len(batch))
	for i, l := range batch {
		errs[i] = l.Data.(*handle).check()
	}
	return errs
}

// onChange is called by the watcher when a file of the lock key was
// released (a holder's signal descriptor closed) or, with moved, deleted or
// replaced. It wakes the key's waiters and, when moved, checks that the
// key's holders still have their files.
func (p *Provider) onChange(key string, moved bool) {
	p.wake(key)
	if moved {
		p.checkHeld(func(k string) bool { return k == key })
	}
}

// onChangeAll is called when the watcher may have missed changes.
func (p *Provider) onChangeAll() {
	p.notifier.NotifyAll()
	p.checkHeld(func(string) bool { return true })
}

func (p *Provider) checkHeld(match func(key string) bool) {
	var hs []*handle
	p.mu.Lock()
	for key, set := range p.held {
		if match(key) {
			for h := range set {
				hs = append(hs, h)
			}
		}
	}
	p.mu.Unlock()
	for _, h := range hs {
		if err := h.check(); errors.Is(err, core.ErrLockLost) {
			h.Lose(err)
		}
	}
}

// busy is what an attempt on a held lock returns.
func busy(name, what string) error {
	return kit.Wrap(backend, "acquire", name, kit.Busy("%s", what))
}
