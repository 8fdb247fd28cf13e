package filelock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
)

// eventually bounds the waits of these tests: long enough never to fire on
// a loaded machine, and it only fires when the code under test is broken.
const eventually = 10 * time.Second

// noPoll is a backoff so long that a waiter that finishes did not poll: it
// was woken by a release signal.
var noPoll = WithBackoff(kit.Backoff{Min: time.Hour, Max: time.Hour})

func newProvider(t *testing.T, dir string, opts ...Option) *Provider {
	t.Helper()
	p, err := New(dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return p
}

func deadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	t.Cleanup(cancel)
	return ctx
}

// acquireAndRelease runs l.Acquire, bounded by the test's deadline, and then
// the handle's Release in a goroutine, and sends their error.
func acquireAndRelease(t *testing.T, l core.Locker) <-chan error {
	got := make(chan error, 1)
	go func() {
		h, err := l.Acquire(deadline(t))
		if err == nil {
			err = h.Release(context.Background())
		}
		got <- err
	}()
	return got
}

func lockPath(h core.Handle) string {
	fh := h.(*handle)
	fh.mu.Lock()
	defer fh.mu.Unlock()
	return fh.file.path
}

// kinds makes one locker of each primitive for a name.
var kinds = []struct {
	name string
	make func(p *Provider, name string) core.Locker
}{
	{"Mutex", func(p *Provider, n string) core.Locker { return p.Mutex(n) }},
	{"RWMutexWrite", func(p *Provider, n string) core.Locker { return p.RWMutex(n) }},
	{"RWMutexRead", func(p *Provider, n string) core.Locker { return p.RWMutex(n).RLocker() }},
	{"Semaphore", func(p *Provider, n string) core.Locker { return p.Semaphore(n, 2) }},
}

func TestNames(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "locks")
	p := newProvider(t, dir)
	ctx := context.Background()
	names := []string{
		"a", "A", "../../../escape", "/etc/passwd", `C:\Windows\win.ini`, "..", ".",
		"nul\x00byte", "emoji 😀", "a/b/../c", strings.Repeat("long", 250), "con", "x.lock",
	}
	for _, k := range kinds {
		var hs []core.Handle
		for _, n := range names {
			h, err := k.make(p, n).TryAcquire(ctx)
			require.NoError(t, err, "%s %q", k.name, n)
			hs = append(hs, h)
		}
		// Every name is a different lock, including "a" and "A".
		paths := map[string]bool{}
		for _, h := range hs {
			paths[lockPath(h)] = true
		}
		assert.Len(t, paths, len(names), k.name)
		for _, h := range hs {
			require.NoError(t, h.Release(ctx))
		}
	}
	// Nothing was written outside dir, and every file name is portable:
	// at most 64 characters of [A-Za-z0-9_.-].
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if path == dir {
			return nil
		}
		base := d.Name()
		assert.LessOrEqual(t, len(base), 64, path)
		assert.Regexp(t, `^[A-Za-z0-9_.-]+$`, base)
		assert.NotContains(t, []string{".", ".."}, base)
		return nil
	}))
}

func TestKindsAreDistinct(t *testing.T) {
	p := newProvider(t, t.TempDir())
	ctx := context.Background()
	var hs []core.Handle
	for _, k := range kinds[:2] {
		h, err := k.make(p, "same").TryAcquire(ctx)
		require.NoError(t, err, k.name)
		hs = append(hs, h)
	}
	h, err := p.Semaphore("same", 1).TryAcquire(ctx)
	require.NoError(t, err)
	hs = append(hs, h)
	for _, h := range hs {
		require.NoError(t, h.Release(ctx))
	}
}

func TestBadInput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	p := newProvider(t, dir)
	bad := "bad\xffutf8"
	cases := []struct {
		name   string
		locker core.Locker
		ctx    context.Context
		want   error
		lock   string // the name the message must quote
	}{
		{"empty mutex", p.Mutex(""), context.Background(), core.ErrInvalidName, `""`},
		{"empty rw", p.RWMutex(""), context.Background(), core.ErrInvalidName, `""`},
		{"empty reader", p.RWMutex("").RLocker(), context.Background(), core.ErrInvalidName, `""`},
		{"empty semaphore", p.Semaphore("", 3), context.Background(), core.ErrInvalidName, `""`},
		{"invalid UTF-8", p.Mutex(bad), context.Background(), core.ErrInvalidName, `"bad\xffutf8"`},
		{"semaphore max 0", p.Semaphore("sem", 0), context.Background(), core.ErrInvalidArgument, `"sem"`},
		{"semaphore max -1", p.Semaphore("sem", -1), context.Background(), core.ErrInvalidArgument, `"sem"`},
		{"semaphore max too large", p.Semaphore("sem", MaxSemaphore+1), context.Background(), core.ErrInvalidArgument, `"sem"`},
		{"nil context mutex", p.Mutex("m"), nil, core.ErrInvalidArgument, `"m"`},
		{"nil context reader", p.RWMutex("rw").RLocker(), nil, core.ErrInvalidArgument, `"rw"`},
		{"nil context semaphore", p.Semaphore("s", 2), nil, core.ErrInvalidArgument, `"s"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for op, acquire := range map[string]func(context.Context) (core.Handle, error){
				"TryAcquire": c.locker.TryAcquire,
				"Acquire":    c.locker.Acquire,
			} {
				h, err := acquire(c.ctx) //nolint:staticcheck // a nil context is the point
				require.Error(t, err, op)
				assert.Nil(t, h, op)
				assert.ErrorIs(t, err, c.want, op)
				assert.Contains(t, err.Error(), c.lock, op)
				assert.Contains(t, err.Error(), "distlock/file", op)
			}
		})
	}
	// None of it touched the disk.
	_, err := os.Stat(dir)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestNewBadDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for name, dir := range map[string]string{
		"empty":          "",
		"a file":         file,
		"under a file":   filepath.Join(file, "sub"),
		"under a file 2": filepath.Join(file, "sub", "sub"),
	} {
		t.Run(name, func(t *testing.T) {
			p, err := New(dir)
			assert.Nil(t, p)
			assert.ErrorIs(t, err, core.ErrInvalidArgument)
		})
	}
	for name, opt := range map[string]Option{
		"zero backoff":        WithBackoff(kit.Backoff{}),
		"inverted backoff":    WithBackoff(kit.Backoff{Min: time.Second, Max: time.Millisecond}),
		"zero check interval": WithCheckInterval(0),
	} {
		t.Run(name, func(t *testing.T) {
			p, err := New(t.TempDir(), opt)
			assert.Nil(t, p)
			assert.ErrorIs(t, err, core.ErrInvalidArgument)
		})
	}
}

// A directory that becomes a file after New is reported by the acquire,
// naming the lock.
func TestDirectoryBecomesFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	p := newProvider(t, dir)
	require.NoError(t, os.WriteFile(dir, []byte("not a directory"), 0o644))
	for _, k := range kinds {
		for op, acquire := range map[string]func(core.Locker) (core.Handle, error){
			"TryAcquire": func(l core.Locker) (core.Handle, error) { return l.TryAcquire(context.Background()) },
			"Acquire":    func(l core.Locker) (core.Handle, error) { return l.Acquire(deadline(t)) },
		} {
			h, err := acquire(k.make(p, "the-lock"))
			require.Error(t, err, "%s %s", k.name, op)
			assert.Nil(t, h)
			assert.ErrorIs(t, err, core.ErrInvalidArgument, "%s %s", k.name, op)
			assert.Contains(t, err.Error(), `"the-lock"`)
		}
	}
	b, err := os.ReadFile(dir)
	require.NoError(t, err)
	assert.Equal(t, "not a directory", string(b))
}

func TestReadOnlyDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o555))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	if os.Geteuid() == 0 {
		// Permission bits do not bind root, but sysfs refuses new files
		// to everyone.
		dir = readOnlyForRoot(t)
	}
	p := newProvider(t, filepath.Join(dir, "locks"))
	for _, k := range kinds {
		h, err := k.make(p, "ro").TryAcquire(context.Background())
		require.Error(t, err, k.name)
		assert.Nil(t, h)
		assert.ErrorIs(t, err, core.ErrInvalidArgument, k.name)
		assert.ErrorIs(t, err, fs.ErrPermission, k.name)
		assert.Contains(t, err.Error(), `"ro"`)
	}
	_, err := os.Stat(filepath.Join(dir, "locks"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "nothing was written")
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err     error
		invalid bool
	}{
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, true},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EROFS}, true},
		{&fs.PathError{Op: "mkdir", Path: "x", Err: syscall.ENOTDIR}, true},
		{errors.New("disk on fire"), false},
		{&fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}, false},
	} {
		got := classify(c.err)
		assert.ErrorIs(t, got, c.err)
		assert.Equal(t, c.invalid, errors.Is(got, core.ErrInvalidArgument), "%v", c.err)
	}
}

// Lock files stay after release and are reused; each fencing counter
// sits beside its lock file.
func TestLockFilesAreReused(t *testing.T) {
	p := newProvider(t, t.TempDir())
	ctx := context.Background()
	for _, k := range kinds {
		l := k.make(p, "reuse-"+k.name)
		if k.name == "Semaphore" {
			l = p.Semaphore("reuse-"+k.name, 1) // one slot, one file
		}
		h, err := l.TryAcquire(ctx)
		require.NoError(t, err)
		path := lockPath(h)
		first := h.(*handle).file.info
		require.NoError(t, h.Release(ctx))
		require.NoError(t, h.Release(ctx), "a second Release is a no-op")
		require.FileExists(t, path, k.name)

		h, err = l.TryAcquire(ctx)
		require.NoError(t, err)
		assert.True(t, os.SameFile(first, h.(*handle).file.info), k.name)
		require.NoError(t, h.Release(ctx))

		b, err := os.ReadFile(h.(*handle).key + ".ctr")
		require.NoError(t, err)
		assert.Equal(t, "2\n", string(b), k.name)
	}
}

// An attempt that locks a file which was deleted in the meantime (say by a
// cleanup job) must not count as a grant: it tries again on the file now
// at the path.
func TestLockedFileDeletedBeforeLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	other := newProvider(t, dir)
	p := newProvider(t, dir)
	m := p.Mutex("race")
	h, err := m.TryAcquire(ctx) // create the file
	require.NoError(t, err)
	require.NoError(t, h.Release(ctx))

	deleted := false
	p.hookAfterOpen = func(path string) {
		if !deleted {
			deleted = true
			require.NoError(t, os.Remove(path))
		}
	}
	h, err = m.TryAcquire(ctx)
	require.NoError(t, err)
	require.True(t, deleted)
	p.hookAfterOpen = nil

	// We hold the file that is at the path, so nobody else gets the lock.
	fi, err := os.Stat(lockPath(h))
	require.NoError(t, err)
	assert.True(t, os.SameFile(fi, h.(*handle).file.info))
	h2, err := other.Mutex("race").TryAcquire(ctx)
	assert.ErrorIs(t, err, core.ErrNotAcquired)
	assert.Nil(t, h2)
	require.NoError(t, h.Release(ctx))
}

func TestLost(t *testing.T) {
	breakers := map[string]func(t *testing.T, path string){
		"deleted": func(t *testing.T, path string) { require.NoError(t, os.Remove(path)) },
		"replaced": func(t *testing.T, path string) {
			tmp := path + ".tmp"
			require.NoError(t, os.WriteFile(tmp, nil, 0o644))
			require.NoError(t, os.Rename(tmp, path))
		},
	}
	detectors := map[string][]Option{
		"watcher": {WithCheckInterval(time.Hour)},
		"checker": {withoutNotify(), WithCheckInterval(10 * time.Millisecond)},
	}
	for bname, breakIt := range breakers {
		for dname, opts := range detectors {
			for _, k := range kinds {
				t.Run(bname+"/"+dname+"/"+k.name, func(t *testing.T) {
					var logged locktest.LogBuffer
					p := newProvider(t, t.TempDir(), append(opts, WithLogger(logged.Logger()))...)
					h, err := k.make(p, "victim").TryAcquire(context.Background())
					require.NoError(t, err)
					breakIt(t, lockPath(h))
					select {
					case <-h.Context().Done():
					case <-time.After(eventually):
						t.Fatal("the handle did not notice its lock file was " + bname)
					}
					assert.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
					// The loss is logged right after the context ends.
					require.Eventually(t, func() bool {
						line := logged.String()
						return strings.Contains(line, `msg="distlock: lock lost" backend=file primitive=`) && strings.Contains(line, "lock=victim")
					}, eventually, time.Millisecond, logged.String())
					require.NoError(t, h.Release(context.Background()))
					assert.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost, "Release keeps the lost cause")
				})
			}
		}
	}
}

// A stale handle's release never frees a later holder's grant, even when
// the file was replaced under it.
func TestStaleReleaseKeepsLaterHolder(t *testing.T) {
	ctx := context.Background()
	p := newProvider(t, t.TempDir())
	m := p.Mutex("stale")
	old, err := m.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, os.Remove(lockPath(old))) // an operator deletes it
	later, err := m.Acquire(deadline(t))
	require.NoError(t, err)
	require.NoError(t, old.Release(ctx))
	assert.FileExists(t, lockPath(later))
	h, err := m.TryAcquire(ctx)
	assert.ErrorIs(t, err, core.ErrNotAcquired, "the later holder still holds it")
	assert.Nil(t, h)
	assert.NoError(t, later.Context().Err())
	require.NoError(t, later.Release(ctx))
}

// Waiters wake on the release itself, not on a poll: with a backoff of an
// hour, only a release signal can end these waits in time.
func TestWaitWakesOnRelease(t *testing.T) {
	for _, c := range []struct {
		name string
		// holder and waiter providers
		same   bool
		waiter []Option
	}{
		{"other process via inotify", false, []Option{noPoll}},
		{"same provider", true, []Option{noPoll, withoutNotify()}},
		{"poll fallback", false, []Option{withoutNotify(), WithBackoff(kit.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond})}},
	} {
		for _, k := range kinds {
			t.Run(c.name+"/"+k.name, func(t *testing.T) {
				dir := t.TempDir()
				waiterP := newProvider(t, dir, c.waiter...)
				holderP := waiterP
				if !c.same {
					holderP = newProvider(t, dir)
				}
				l := k.make(holderP, "wake")
				if k.name == "RWMutexRead" {
					l = holderP.RWMutex("wake") // a writer blocks readers
				}
				if k.name == "Semaphore" {
					l = holderP.Semaphore("wake", 1)
				}
				held, err := l.TryAcquire(context.Background())
				require.NoError(t, err)
				w := k.make(waiterP, "wake")
				if k.name == "Semaphore" {
					w = waiterP.Semaphore("wake", 1)
				}
				got := acquireAndRelease(t, w)
				waitForSubscriber(t, waiterP)
				require.NoError(t, held.Release(context.Background()))
				require.NoError(t, <-got)
			})
		}
	}
}

// waitForSubscriber waits until a waiter of p has subscribed to release
// signals, so a release is sure to find it waiting.
func waitForSubscriber(t *testing.T, p *Provider) {
	t.Helper()
	ctx := deadline(t)
	for p.notifier.Len() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("no waiter subscribed")
		case <-time.After(time.Millisecond):
		}
	}
}

func TestFencingCounter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var last uint64
	for i := range 3 {
		p := newProvider(t, dir) // a new process each round
		for _, l := range []core.Locker{p.RWMutex("f"), p.RWMutex("f").RLocker()} {
			h, err := l.TryAcquire(ctx)
			require.NoError(t, err)
			assert.Greater(t, h.FencingToken(), last, "round %d", i)
			last = h.FencingToken()
			require.NoError(t, h.Release(ctx))
		}
	}
	assert.Equal(t, uint64(6), last)

	// A counter that cannot be read fails the acquire instead of starting
	// over, and leaves the lock free.
	p := newProvider(t, dir)
	fence := p.base(mutexDir, "corrupt") + ".ctr"
	require.NoError(t, os.MkdirAll(filepath.Dir(fence), 0o755))
	require.NoError(t, os.WriteFile(fence, []byte("garbage\n"), 0o644))
	h, err := p.Mutex("corrupt").TryAcquire(ctx)
	require.Error(t, err)
	assert.Nil(t, h)
	assert.Contains(t, err.Error(), "corrupt fencing counter")
	// The failed grant let go of the lock file.
	require.NoError(t, os.WriteFile(fence, []byte("41\n"), 0o644))
	h, err = p.Mutex("corrupt").TryAcquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(42), h.FencingToken())
	require.NoError(t, h.Release(ctx))
}

func TestClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	other := newProvider(t, dir)
	p, err := New(dir)
	require.NoError(t, err)

	held, err := p.Mutex("c").TryAcquire(ctx)
	require.NoError(t, err)
	blocker, err := other.Mutex("blocked").TryAcquire(ctx)
	require.NoError(t, err)
	waiting := make(chan error, 1)
	go func() {
		_, err := p.Mutex("blocked").Acquire(deadline(t))
		waiting <- err
	}()
	waitForSubscriber(t, p)

	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "Close is idempotent")

	assert.ErrorIs(t, context.Cause(held.Context()), core.ErrLockLost)
	assert.ErrorIs(t, <-waiting, core.ErrInvalidArgument)
	_, err = p.Mutex("c").TryAcquire(ctx)
	assert.ErrorIs(t, err, core.ErrInvalidArgument)

	// Close let go of the file: another process takes it at once.
	h, err := other.Mutex("c").TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, held.Release(ctx), "releasing after Close is harmless")
	assert.NoError(t, h.Context().Err())
	require.NoError(t, h.Release(ctx))
	require.NoError(t, blocker.Release(ctx))
}

func TestCancelledContext(t *testing.T) {
	p := newProvider(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, k := range kinds {
		for op, acquire := range map[string]func(context.Context) (core.Handle, error){
			"TryAcquire": k.make(p, "cancelled").TryAcquire,
			"Acquire":    k.make(p, "cancelled").Acquire,
		} {
			h, err := acquire(ctx)
			assert.Nil(t, h)
			assert.ErrorIs(t, err, core.ErrNotAcquired, "%s %s", k.name, op)
			assert.ErrorIs(t, err, context.Canceled, "%s %s", k.name, op)
		}
	}
	entries, err := os.ReadDir(p.Dir())
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing was locked or created")
}

// A waiting writer keeps the gate; giving up must hand it back so readers
// get in again.
func TestWriterGivingUpLetsReadersIn(t *testing.T) {
	ctx := context.Background()
	p := newProvider(t, t.TempDir())
	rw := p.RWMutex("gate")
	r1, err := rw.RLocker().TryAcquire(ctx)
	require.NoError(t, err)

	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := rw.Acquire(wctx)
		done <- err
	}()
	waitForSubscriber(t, p)
	// Once the writer waits, new readers are kept out.
	until := deadline(t)
	for {
		h, err := rw.RLocker().TryAcquire(ctx)
		if err != nil {
			require.ErrorIs(t, err, core.ErrNotAcquired)
			break
		}
		require.NoError(t, h.Release(ctx)) // the writer has not made its first attempt yet
		select {
		case <-until.Done():
			t.Fatal("a waiting writer never kept readers out")
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	err = <-done
	assert.ErrorIs(t, err, core.ErrNotAcquired)
	assert.ErrorIs(t, err, context.Canceled)

	r2, err := rw.RLocker().TryAcquire(ctx)
	require.NoError(t, err, "the writer gave the gate back")
	require.NoError(t, r2.Release(ctx))
	require.NoError(t, r1.Release(ctx))
}

// A symbolic link planted where a lock or counter file goes is not
// followed: nothing is created or written outside the directory.
func TestSymlinkNotFollowed(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "locks")
	p := newProvider(t, dir)
	outside := filepath.Join(root, "outside")
	base := p.base(mutexDir, "planted")
	require.NoError(t, os.MkdirAll(filepath.Dir(base), 0o755))
	for _, ext := range []string{".lock", ".ctr"} {
		t.Run(ext, func(t *testing.T) {
			require.NoError(t, os.Symlink(outside, base+ext))
			defer os.Remove(base + ext)
			h, err := p.Mutex("planted").TryAcquire(context.Background())
			require.Error(t, err)
			assert.Nil(t, h)
			assert.Contains(t, err.Error(), `"planted"`)
			assert.NoFileExists(t, outside)
		})
	}
}

// When a holder dies, the kernel closes its descriptors; closing the
// signal descriptor wakes the waiters of other processes at once, without
// a poll.
func TestWaitWakesOnHolderDeath(t *testing.T) {
	dir := t.TempDir()
	dying := newProvider(t, dir)
	waiter := newProvider(t, dir, noPoll)
	lf, err := dying.tryLock(dying.base(mutexDir, "abandoned")+".lock", false, true)
	require.NoError(t, err)
	require.NotNil(t, lf.signal)

	got := acquireAndRelease(t, waiter.Mutex("abandoned"))
	waitForSubscriber(t, waiter)
	// What the kernel does for a process that exits: close everything,
	// with no Release and no in-process signal.
	require.NoError(t, lf.f.Close())
	require.NoError(t, lf.signal.Close())
	require.NoError(t, <-got)
}

// Removing the whole directory makes every holder lost; the next acquire
// creates it again, and waiting still wakes on releases.
func TestDirectoryRemoved(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "locks")
	p := newProvider(t, dir, WithCheckInterval(time.Hour))
	var hs []core.Handle
	for _, k := range kinds {
		h, err := k.make(p, "doomed-"+k.name).TryAcquire(ctx)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	require.NoError(t, os.RemoveAll(dir))
	for i, h := range hs {
		select {
		case <-h.Context().Done():
		case <-time.After(eventually):
			t.Fatalf("%s: the holder did not notice", kinds[i].name)
		}
		assert.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
		require.NoError(t, h.Release(ctx))
	}

	other := newProvider(t, dir)
	held, err := other.Mutex("again").Acquire(deadline(t))
	require.NoError(t, err)
	waiter := newProvider(t, dir, noPoll)
	got := acquireAndRelease(t, waiter.Mutex("again"))
	waitForSubscriber(t, waiter)
	require.NoError(t, held.Release(ctx))
	require.NoError(t, <-got)
}
