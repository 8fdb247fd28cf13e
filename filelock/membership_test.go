package filelock

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
)

// fakeClock is a settable clock for membership expiry.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestMembership(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	p1 := newProvider(t, dir)
	p2 := newProvider(t, dir) // another process
	p1.now, p2.now = clock.now, clock.now

	members := func() []string {
		t.Helper()
		got, err := p2.Members(ctx, "workers")
		require.NoError(t, err)
		return got
	}
	assert.Empty(t, members(), "unknown group")

	require.NoError(t, p1.Register(ctx, "workers", "host-b", 30*time.Second))
	require.NoError(t, p1.Register(ctx, "workers", "host-a", 10*time.Second))
	require.NoError(t, p1.Register(ctx, "workers", "weird/../id\nwith newline", time.Minute))
	require.NoError(t, p1.Register(ctx, "other", "host-c", time.Minute))
	assert.Equal(t, []string{"host-a", "host-b", "weird/../id\nwith newline"}, members())

	clock.advance(10 * time.Second) // host-a's registration ends now
	assert.Equal(t, []string{"host-b", "weird/../id\nwith newline"}, members())

	// A refresh extends a registration; the expired one was swept away.
	require.NoError(t, p1.Register(ctx, "workers", "host-b", 30*time.Second))
	clock.advance(25 * time.Second)
	assert.Equal(t, []string{"host-b", "weird/../id\nwith newline"}, members())
	files, err := filepath.Glob(filepath.Join(dir, membershipDir, "*", "*.mem"))
	require.NoError(t, err)
	assert.Len(t, files, 3, "host-a's file is gone")

	require.NoError(t, p1.Deregister(ctx, "workers", "host-b"))
	require.NoError(t, p1.Deregister(ctx, "workers", "host-b"), "absent: not an error")
	require.NoError(t, p1.Deregister(ctx, "nobody-here", "x"))
	assert.Equal(t, []string{"weird/../id\nwith newline"}, members())

	got, err := p2.Members(ctx, "other")
	require.NoError(t, err)
	assert.Equal(t, []string{"host-c"}, got)
}

func TestMembershipBadInput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	p := newProvider(t, dir)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"empty group", p.Register(ctx, "", "id", time.Second), core.ErrInvalidName},
		{"empty id", p.Register(ctx, "g", "", time.Second), core.ErrInvalidArgument},
		{"invalid UTF-8 id", p.Deregister(ctx, "g", "\xff"), core.ErrInvalidArgument},
		{"zero ttl", p.Register(ctx, "g", "id", 0), core.ErrInvalidArgument},
		{"negative ttl", p.Register(ctx, "g", "id", -time.Second), core.ErrInvalidArgument},
		{"nil context", p.Register(nil, "g", "id", time.Second), core.ErrInvalidArgument}, //nolint:staticcheck
		{"members of empty group", func() error { _, err := p.Members(ctx, ""); return err }(), core.ErrInvalidName},
	} {
		assert.ErrorIs(t, c.err, c.want, c.name)
	}
	_, err := os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing was written")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, p.Register(cancelled, "g", "id", time.Second), context.Canceled)
	_, err = p.Members(cancelled, "g")
	assert.ErrorIs(t, err, context.Canceled)

	require.NoError(t, p.Close())
	assert.ErrorIs(t, p.Register(ctx, "g", "id", time.Second), core.ErrInvalidArgument)
}

// Registrations from many goroutines of many Providers never corrupt the
// listing.
func TestMembershipConcurrent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	onProviders(t, dir, func(i int, p *Provider) {
		for j := range 20 {
			id := fmt.Sprintf("p%d-%d", i, j%3)
			assert.NoError(t, p.Register(ctx, "g", id, time.Hour))
			got, err := p.Members(ctx, "g")
			assert.NoError(t, err)
			assert.Contains(t, got, id)
		}
	})
	got, err := newProvider(t, dir).Members(ctx, "g")
	require.NoError(t, err)
	assert.Len(t, got, 12)
}

// Files written by a version without values, or cut short, read as an
// empty value; value files of no live registration are swept.
func TestAnnounceFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	p := newProvider(t, dir)
	p.now = clock.now
	gdir := filepath.Join(dir, membershipDir, fileStem("g"))
	announce := func(id string, value []byte) map[string]string {
		t.Helper()
		ms, err := p.Announce(ctx, "g", id, time.Minute, value)
		require.NoError(t, err)
		got := map[string]string{}
		for _, m := range ms {
			got[m.ID] = string(m.Value)
		}
		return got
	}
	exists := func(path string) bool {
		_, err := os.Stat(path)
		return err == nil
	}

	// A member file as the previous version wrote it, with a value file
	// that an Announce left before that version's Register rewrote it.
	require.NoError(t, os.MkdirAll(gdir, 0o777))
	expiry := clock.now().Add(time.Minute).UnixNano()
	old := []byte(fmt.Sprint(expiry, "\nold"))
	require.NoError(t, os.WriteFile(memberPath(gdir, "old"), old, 0o666))
	require.NoError(t, os.WriteFile(valuePath(gdir, "old"), append(valueHeader(expiry-1, 5), "stale"...), 0o666))
	assert.Equal(t, map[string]string{"old": "", "new": "v1"}, announce("new", []byte("v1")))
	assert.False(t, exists(valuePath(gdir, "old")), "the stale value file is swept")

	// A value file cut short by a crash.
	require.NoError(t, os.Truncate(valuePath(gdir, "new"), int64(len(valueHeader(expiry, 2))+1)))
	assert.Equal(t, map[string]string{"old": "", "new": ""}, announce("old", nil))
	assert.False(t, exists(valuePath(gdir, "new")), "the short value file is swept")

	// A value file without its member file (a crash between the writes
	// of a first Announce) is swept by Members too.
	require.NoError(t, os.WriteFile(valuePath(gdir, "orphan"), append(valueHeader(expiry, 1), 'x'), 0o666))
	got, err := p.Members(ctx, "g")
	require.NoError(t, err)
	assert.Equal(t, []string{"new", "old"}, got)
	assert.False(t, exists(valuePath(gdir, "orphan")))

	// Deregister and expiry remove the value file with the member file.
	announce("new", []byte("v2"))
	require.NoError(t, p.Deregister(ctx, "g", "new"))
	assert.False(t, exists(valuePath(gdir, "new")))
	announce("new", []byte("v3"))
	clock.advance(time.Minute)
	_, err = p.Members(ctx, "g")
	require.NoError(t, err)
	files, err := os.ReadDir(gdir)
	require.NoError(t, err)
	assert.Empty(t, files)
}

// A value being rewritten by one Provider is never listed half written by
// another.
func TestAnnounceConcurrent(t *testing.T) {
	ctx := context.Background()
	onProviders(t, t.TempDir(), func(i int, p *Provider) {
		for j := range 20 {
			// Each value is one repeated byte, its length set by it.
			b := byte(i*20 + j)
			value := bytes.Repeat([]byte{b}, 1000+int(b)*500)
			ms, err := p.Announce(ctx, "g", fmt.Sprint("p", i), time.Hour, value)
			if !assert.NoError(t, err) {
				return
			}
			for _, m := range ms {
				if !assert.NotEmpty(t, m.Value, m.ID) {
					continue
				}
				want := bytes.Repeat(m.Value[:1], 1000+int(m.Value[0])*500)
				assert.True(t, bytes.Equal(m.Value, want), "%s's value of %d bytes is torn", m.ID, len(m.Value))
			}
		}
	})
}

// onProviders runs f at once on 4 Providers of dir, each in a goroutine of
// its own, and returns when all have returned.
func onProviders(t *testing.T, dir string, f func(i int, p *Provider)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range 4 {
		p := newProvider(t, dir)
		wg.Go(func() { f(i, p) })
	}
	wg.Wait()
}
