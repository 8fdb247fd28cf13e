//go:build linux

package filelock

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
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
	tk, _, err := takeTicket(base, func() { rung.Add(1) })
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
	dead := filepath.Join(dir, ticketName(time.Now().Add(-time.Hour)))
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
	plain := filepath.Join(dir, ticketName(time.Now().Add(-time.Hour)))
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
	_, _, err = takeTicket(linked, func() {})
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
	holder := newProvider(t, dir)
	lf, err := holder.tryLock(holder.base(mutexDir, "x")+".lock", false, true)
	require.NoError(t, err)
	defer lf.signal.Close()

	first := newProvider(t, dir, noPoll)
	firstCtx, giveUp := context.WithCancel(deadline(t))
	firstDone := make(chan error, 1)
	go func() {
		_, err := first.Mutex("x").Acquire(firstCtx)
		firstDone <- err
	}()
	waitLine(t, holder.base(mutexDir, "x"), 1)

	second := newProvider(t, dir, noPoll)
	got := make(chan error, 1)
	go func() {
		h, err := second.Mutex("x").Acquire(deadline(t))
		if err == nil {
			err = h.Release(context.Background())
		}
		got <- err
	}()
	waitLine(t, holder.base(mutexDir, "x"), 2)

	require.NoError(t, lf.f.Close()) // unlocked; no ring, no close event
	giveUp()
	require.Error(t, <-firstDone)
	require.NoError(t, <-got)
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
