package filelock

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Holder wakes no waiter: on a held lock, a free one, one never locked and
// one whose holder died, it causes none of the events the watcher wakes
// waiters on.
func TestHolderWakesNobody(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := newProvider(t, dir, withoutNotify())
	h, err := p.Mutex("held").TryAcquire(ctx)
	require.NoError(t, err)
	free, err := p.Mutex("free").TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, free.Release(ctx))
	dead, err := p.Mutex("dead").TryAcquire(ctx)
	require.NoError(t, err)
	dead.(*handle).file.recorded = false // it dies: its record stays
	require.NoError(t, dead.Release(ctx))

	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	_, err = unix.InotifyAddWatch(fd, filepath.Join(dir, mutexDir), watchMask)
	require.NoError(t, err)

	for _, name := range []string{"held", "free", "dead", "never-locked"} {
		for range 3 {
			_, held := holderOf(t, p.Mutex(name))
			assert.Equal(t, name == "held", held, name)
		}
	}
	var buf [4096]byte
	n, err := unix.Read(fd, buf[:])
	assert.ErrorIs(t, err, unix.EAGAIN, "Holder caused %d bytes of inotify events", n)
	require.NoError(t, h.Release(ctx))
}
