//go:build linux

package filelock

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// lineTicket takes a ticket in the line of base and counts its rings.
func lineTicket(t *testing.T, base string) (*ticket, *atomic.Int32) {
	t.Helper()
	var rung atomic.Int32
	tk, _, err := takeTicket(base, func(try bool) {
		if try {
			rung.Add(1)
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { tk.unlink(); tk.close() })
	return tk, &rung
}

// waitRung waits until n counts at least one ring.
func waitRung(t *testing.T, n *atomic.Int32, who string) {
	t.Helper()
	ctx := deadline(t)
	for n.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%s was not rung", who)
		case <-time.After(time.Millisecond):
		}
	}
}

// pending is how many bytes wait unread in tk's FIFO.
func pending(t *testing.T, tk *ticket) int {
	t.Helper()
	rc, err := tk.f.SyscallConn()
	require.NoError(t, err)
	var n int
	var ierr error
	require.NoError(t, rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }))
	require.NoError(t, ierr)
	return n
}

// A release rings the earliest tickets of the line, rings of them, and no
// other: the waiters behind them sleep through it.
func TestLineRingsTheFirstWaiters(t *testing.T) {
	base := filepath.Join(t.TempDir(), "mutex", "x")
	var tks []*ticket
	var counts []*atomic.Int32
	for range rings + 2 {
		tk, n := lineTicket(t, base)
		tks, counts = append(tks, tk), append(counts, n)
	}
	names, err := lineNames(base + lineSuffix)
	require.NoError(t, err)
	for i, tk := range tks {
		require.Equal(t, filepath.Base(tk.path), names[i], "tickets sort by arrival")
	}

	wakeLine(base)
	for i := range rings {
		waitRung(t, counts[i], "a waiter at the front")
	}
	for i := rings; i < len(tks); i++ {
		assert.Zero(t, counts[i].Load()+int32(pending(t, tks[i])), "waiter %d was rung", i)
	}
}

// A ticket whose waiter is gone (its FIFO has no reader, as after the
// waiter's process died) is deleted by the release, which rings the live
// waiters behind it instead.
func TestLineSkipsDeadWaiters(t *testing.T) {
	base := filepath.Join(t.TempDir(), "mutex", "x")
	dir := base + lineSuffix
	require.NoError(t, os.MkdirAll(dir, 0o755))
	dead := filepath.Join(dir, ticketName(monotonic()-int64(time.Hour)))
	require.NoError(t, unix.Mkfifo(dead, 0o600))
	_, rung := lineTicket(t, base)

	wakeLine(base)
	waitRung(t, rung, "the live waiter")
	assert.NoFileExists(t, dead)
}

// A file that is not a FIFO, or not named as a ticket, is never written,
// and a symbolic link in place of the line directory is not followed.
func TestLineWritesOnlyTickets(t *testing.T) {
	root := t.TempDir()
	base := filepath.Join(root, "mutex", "x")
	dir := base + lineSuffix
	require.NoError(t, os.MkdirAll(dir, 0o755))
	plain := filepath.Join(dir, ticketName(monotonic()-int64(time.Hour)))
	require.NoError(t, os.WriteFile(plain, nil, 0o600))
	other := filepath.Join(dir, "fifo")
	require.NoError(t, unix.Mkfifo(other, 0o600))
	wakeLine(base) // other has no reader: opening it would fail, but it is not even tried
	assert.FileExists(t, other)
	got, err := os.ReadFile(plain)
	require.NoError(t, err)
	assert.Empty(t, got)

	outside := filepath.Join(root, "outside")
	require.NoError(t, os.Mkdir(outside, 0o755))
	linked := filepath.Join(root, "mutex", "y")
	require.NoError(t, os.Symlink(outside, linked+lineSuffix))
	_, _, err = takeTicket(linked, func(bool) {})
	require.Error(t, err)
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, entries, "a ticket was left through the link")
}

// A waiter that gives up passes on a ring that may have been meant for it:
// here the lock is freed without a ring (as by a holder of an older
// version that closed its lock but not yet its signal descriptor), the
// first waiter gives up, and the one behind it, which only a ring can
// wake, gets the lock.
func TestLineWaiterGivingUpPassesOn(t *testing.T) {
	dir := t.TempDir()
	base, lf := rawHolder(t, dir)
	defer lf.signal.Close()

	first := newProvider(t, dir, noPoll)
	firstCtx, giveUp := context.WithCancel(deadline(t))
	firstDone := make(chan error, 1)
	go func() {
		_, err := first.Mutex("x").Acquire(firstCtx)
		firstDone <- err
	}()
	waitLine(t, base, 1)

	second := newProvider(t, dir, noPoll)
	got := acquireAndRelease(t, second.Mutex("x"))
	waitLine(t, base, 2)

	require.NoError(t, lf.f.Close()) // unlocked; no ring, no close event
	giveUp()
	require.Error(t, <-firstDone)
	require.NoError(t, <-got)
}

// lineNames lists the tickets of the line directory dir.
func lineNames(dir string) ([]string, error) {
	d, err := openLineDir(dir, false)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return readLine(d, int(d.Fd()))
}

// waitLine waits until the line of base holds n tickets.
func waitLine(t *testing.T, base string, n int) {
	t.Helper()
	ctx := deadline(t)
	for {
		names, _ := lineNames(base + lineSuffix)
		if len(names) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the line did not reach %d waiters", n)
		case <-time.After(time.Millisecond):
		}
	}
}

// A ticket is in the line only while its waiter has it open: releases
// deleting dead waiters' tickets as fast as they can never delete the
// ticket of a waiter that is joining.
func TestLineNeverDeletesALiveTicket(t *testing.T) {
	base := filepath.Join(t.TempDir(), "mutex", "x")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				wakeLine(base)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for i := range 1000 {
		tk, _, err := takeTicket(base, func(bool) {})
		require.NoError(t, err)
		_, err = os.Lstat(tk.path)
		tk.unlink()
		tk.close()
		require.NoError(t, err, "join %d: the ticket of a live waiter was deleted", i)
	}
}

// A waiter is at the front when fewer than rings live waiters are ahead of
// it; dead waiters' tickets ahead do not count, and it deletes them, and
// the stale FIFOs of tickets never renamed into the line.
func TestLineFrontCountsLiveWaitersOnly(t *testing.T) {
	base := filepath.Join(t.TempDir(), "mutex", "x")
	dir := base + lineSuffix
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var dead []string
	for i := range rings + 1 {
		path := filepath.Join(dir, ticketName(monotonic()+int64(time.Duration(i-10)*time.Second)))
		require.NoError(t, unix.Mkfifo(path, 0o600))
		dead = append(dead, path)
	}
	// A ticket's FIFO whose process died before renaming it into the
	// line, a while ago.
	stale := filepath.Join(dir, "."+ticketName(monotonic()-int64(2*time.Minute)))
	require.NoError(t, unix.Mkfifo(stale, 0o600))
	dead = append(dead, stale)
	var live []*ticket
	for i := range rings + 1 {
		tk, atFront, err := takeTicket(base, func(bool) {})
		require.NoError(t, err)
		t.Cleanup(func() { tk.unlink(); tk.close() })
		live = append(live, tk)
		assert.Equal(t, i < rings, atFront, "waiter %d", i)
	}
	for _, path := range dead {
		assert.NoFileExists(t, path)
	}
}

// A grant tells the waiters at the front of the line (behind the new
// holder, whose ticket is gone) that they are there, so that they follow
// the lock file: here a waiter that joined third learns it, and when the
// holder then dies without a ring, the waiters still get the lock in turn
// with no poll.
func TestLineGrantTellsTheFront(t *testing.T) {
	dir := t.TempDir()
	base, lf := rawHolder(t, dir)

	var ps []*Provider
	var got []<-chan error
	for i := range rings + 1 {
		p := newProvider(t, dir, noPoll)
		ps = append(ps, p)
		got = append(got, acquireAndRelease(t, p.Mutex("x")))
		waitLine(t, base, i+1)
	}
	last := ps[rings]
	assert.False(t, leads(last, base), "the third waiter is not at the front when it joins")

	names, err := lineNames(base + lineSuffix)
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(base+lineSuffix, names[0])))
	lf.bell = newBell(base) // as the grant to the first waiter would
	waitFor(t, func() bool { return leads(last, base) }, "the third waiter to learn it is at the front")

	// What the kernel does for a holder that exits: close its
	// descriptors, with no release and no ring.
	lf.bell = nil
	require.NoError(t, lf.f.Close())
	require.NoError(t, lf.signal.Close())
	for _, g := range got {
		require.NoError(t, <-g)
	}
}

// rawHolder locks the mutex "x" in dir as a holder of a Provider does, but
// without a handle or a bell, so the test decides how it releases.
func rawHolder(t *testing.T, dir string) (base string, lf *lockFile) {
	t.Helper()
	p := newProvider(t, dir)
	base = p.base(mutexDir, "x")
	lf, err := p.tryLock(base+".lock", false, true)
	require.NoError(t, err)
	return base, lf
}

// leads reports whether a waiter of p is at the front of base's line.
func leads(p *Provider, base string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.heads[base]) > 0
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	ctx := deadline(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waited for %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

// newTestWatcher starts a watcher that sends the keys of its events.
func newTestWatcher(t *testing.T) (*watcher, <-chan string) {
	t.Helper()
	keys := make(chan string, 64)
	w := newWatcher(func(key string, _ bool) {
		select {
		case keys <- key:
		default:
		}
	}, func() {})
	require.NotNil(t, w)
	t.Cleanup(w.close)
	return w, keys
}

// waitKey waits for an event of key, skipping others.
func waitKey(t *testing.T, keys <-chan string, key string) {
	t.Helper()
	ctx := deadline(t)
	for {
		select {
		case k := <-keys:
			if k == key {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no event for %s", key)
		}
	}
}

// closeWrite opens path for writing and closes it: IN_CLOSE_WRITE.
func closeWrite(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// Followers of a lock file share one watch, which ends with the last of
// them; a file that cannot be watched gives no watch, and unfollowing it
// takes nothing from the others; after the file is replaced, the next
// follower watches the new one, and the old watch's followers do not end
// the new watch.
func TestFollowFile(t *testing.T) {
	w, keys := newTestWatcher(t)
	key := filepath.Join(t.TempDir(), "x")
	assert.Nil(t, w.followFile(key), "no file yet")
	w.unfollowFile(nil)

	closeWrite(t, key+".lock")
	a, b := w.followFile(key), w.followFile(key)
	require.NotNil(t, a)
	require.Same(t, a, b)
	closeWrite(t, key+".lock")
	waitKey(t, keys, key)

	require.NoError(t, os.Remove(key+".lock"))
	waitFor(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.follow[key] == nil
	}, "the dropped watch to be forgotten")
	closeWrite(t, key+".lock")
	c := w.followFile(key)
	require.NotNil(t, c)
	require.NotSame(t, a, c)
	w.unfollowFile(a)
	w.unfollowFile(b)
	closeWrite(t, key+".lock")
	waitKey(t, keys, key)
	w.unfollowFile(c)
	w.mu.Lock()
	assert.Empty(t, w.files)
	assert.Empty(t, w.follow)
	w.mu.Unlock()
}

// Following a lock file that is a symbolic link to a watched directory
// leaves that directory's watch as it was: its releases still wake.
func TestFollowFileDoesNotFollowLinks(t *testing.T) {
	w, keys := newTestWatcher(t)
	root := t.TempDir()
	rw := filepath.Join(root, rwmutexDir)
	mu := filepath.Join(root, mutexDir)
	require.NoError(t, os.Mkdir(rw, 0o755))
	require.NoError(t, os.Mkdir(mu, 0o755))
	require.NoError(t, w.add(rw))
	require.NoError(t, os.Symlink(rw, filepath.Join(mu, "x.lock")))
	if fw := w.followFile(filepath.Join(mu, "x")); fw != nil {
		defer w.unfollowFile(fw)
	}
	closeWrite(t, filepath.Join(rw, "y.lock"))
	waitKey(t, keys, filepath.Join(rw, "y"))
}

// A release whose prepared front died meanwhile (its rings find no reader)
// reads the line again and rings the live waiter behind it, which nothing
// else would wake: it joined third, so it does not follow the lock file.
func TestLineReleaseRingsPastADeadFront(t *testing.T) {
	dir := t.TempDir()
	base, lf := rawHolder(t, dir)
	var front []*ticket
	for range rings {
		tk, _, err := takeTicket(base, func(bool) {})
		require.NoError(t, err)
		front = append(front, tk)
	}

	waiter := newProvider(t, dir, noPoll)
	got := acquireAndRelease(t, waiter.Mutex("x"))
	waitLine(t, base, rings+1)
	require.False(t, leads(waiter, base), "the waiter joined behind a full front")

	lf.bell = newBell(base) // as a grant does: it opens the front
	waitFor(t, func() bool {
		lf.bell.mu.Lock()
		defer lf.bell.mu.Unlock()
		return lf.bell.ready
	}, "the bell to be ready")
	for _, tk := range front {
		tk.close() // the front's processes die: no unlink, no pass-on
	}
	require.NoError(t, lf.release())
	require.NoError(t, <-got)
}

// A ring to a waiter that left raises no SIGPIPE, which a program that
// asked for it with signal.Notify would receive.
func TestLineRingRaisesNoSIGPIPE(t *testing.T) {
	base := filepath.Join(t.TempDir(), "mutex", "x")
	tk, _, err := takeTicket(base, func(bool) {})
	require.NoError(t, err)
	fds := front(base)
	require.Len(t, fds, 1)
	tk.unlink()
	tk.close() // the waiter leaves after the front was opened

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGPIPE, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	assert.False(t, send(fds, ringTry), "the ring reached no one")
	// A SIGPIPE would be raised by the write itself, before this one,
	// and the runtime hands pending signals over in their numbers'
	// order: SIGPIPE (13) before SIGWINCH (28).
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGWINCH))
	select {
	case sig := <-sigs:
		assert.Equal(t, syscall.SIGWINCH, sig)
	case <-deadline(t).Done():
		t.Fatal("no signal")
	}
}
