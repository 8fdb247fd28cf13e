package filelock

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// inspected are the primitives that implement core.Inspector.
var inspected = []struct {
	name string
	make func(p *Provider, name string) core.Locker
}{
	{"Mutex", func(p *Provider, n string) core.Locker { return p.Mutex(n) }},
	{"RWMutexWrite", func(p *Provider, n string) core.Locker { return p.RWMutex(n) }},
}

func holderOf(t *testing.T, l core.Locker) (core.Holder, bool) {
	t.Helper()
	insp, ok := l.(core.Inspector)
	require.True(t, ok, "%T is not a core.Inspector", l)
	h, held, err := insp.Holder(context.Background())
	require.NoError(t, err)
	return h, held
}

func TestHolder(t *testing.T) {
	ctx := context.Background()
	for _, k := range inspected {
		t.Run(k.name, func(t *testing.T) {
			dir := t.TempDir()
			owner := newProvider(t, dir, WithIdentity("owner"))
			viewer := k.make(newProvider(t, dir, WithIdentity("viewer")), "inspected")
			l := k.make(owner, "inspected")

			_, held := holderOf(t, viewer)
			assert.False(t, held, "never locked: no lock file")

			for range 2 {
				h, err := l.TryAcquire(ctx)
				require.NoError(t, err)
				path := lockPath(h)
				got, held := holderOf(t, viewer)
				require.True(t, held)
				assert.Equal(t, core.Holder{ID: "owner", Token: h.FencingToken()}, got)
				got, held = holderOf(t, l)
				assert.True(t, held, "the holder's own Locker sees itself")
				assert.Equal(t, "owner", got.ID)

				require.NoError(t, h.Release(ctx))
				_, held = holderOf(t, viewer)
				assert.False(t, held, "released")
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Empty(t, b, "Release clears the record")
			}
		})
	}
}

// The write side reports writers only: readers hold the file shared and
// record nothing.
func TestHolderIgnoresReaders(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := newProvider(t, dir, WithIdentity("writer"))
	rw := p.RWMutex("shared")
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	// The writer dies: its record stays in the file.
	w.(*handle).file.recorded = false
	require.NoError(t, w.Release(ctx))

	r, err := newProvider(t, dir).RWMutex("shared").RLocker().TryAcquire(ctx)
	require.NoError(t, err)
	_, held := holderOf(t, rw)
	assert.False(t, held, "a reader holds it, and a dead writer's record is not believed")
	require.NoError(t, r.Release(ctx))
}

// A holder that dies without releasing leaves its record; Holder's probe
// sees that nobody holds the lock, and the next holder replaces the record.
func TestHolderAfterHolderDies(t *testing.T) {
	dir := t.TempDir()
	name := "abandoned-" + strconv.FormatUint(uint64(os.Getpid()), 10)
	l := newProvider(t, dir, WithIdentity("parent")).Mutex(name)

	cmd := exec.Command(os.Args[0], "-test.run=^TestHolderChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHolderChild+"="+dir+"\n"+name)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { stdin.Close() })
	var token uint64
	for sc := bufio.NewScanner(stdout); token == 0 && sc.Scan(); {
		if s, ok := strings.CutPrefix(sc.Text(), "token "); ok {
			token, err = strconv.ParseUint(s, 10, 64)
			require.NoError(t, err)
		}
	}
	require.NotZero(t, token, "the child did not acquire")

	got, held := holderOf(t, l)
	require.True(t, held)
	assert.Equal(t, core.Holder{ID: "child", Token: token}, got)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait() // killed; the kernel has closed its descriptors
	_, held = holderOf(t, l)
	assert.False(t, held, "the holder died")
	b, err := os.ReadFile(filepath.Join(dir, mutexDir, fileStem(name)+".lock"))
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("child\n%d\n", token), string(b), "the dead holder's record stays")

	h, err := l.TryAcquire(context.Background())
	require.NoError(t, err)
	got, held = holderOf(t, l)
	require.True(t, held)
	assert.Equal(t, core.Holder{ID: "parent", Token: token + 1}, got)
	require.NoError(t, h.Release(context.Background()))
}

// envHolderChild carries "<dir>\n<name>" to the child process of
// TestHolderAfterHolderDies.
const envHolderChild = "DISTLOCK_FILELOCK_HOLDER_CHILD"

// TestHolderChildProcess is the holder of TestHolderAfterHolderDies, run in
// a child process. It acquires, prints its token, and holds until killed
// (or until its parent goes away and stdin closes).
func TestHolderChildProcess(t *testing.T) {
	env := os.Getenv(envHolderChild)
	if env == "" {
		return // not the child
	}
	dir, name, _ := strings.Cut(env, "\n")
	p, err := New(dir, WithIdentity("child"))
	require.NoError(t, err)
	defer p.Close()
	h, err := p.Mutex(name).TryAcquire(context.Background())
	require.NoError(t, err)
	fmt.Printf("token %d\n", h.FencingToken())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// Concurrent grants and releases by holders of different identities: every
// holder Holder reports is one that was granted, with its own token.
func TestHolderRacingGrants(t *testing.T) {
	ctx := context.Background()
	wait := deadline(t)
	dir := t.TempDir()
	viewer := newProvider(t, dir).Mutex("busy").(core.Inspector)
	var (
		mu      sync.Mutex
		granted = map[uint64]string{}
		wg      sync.WaitGroup
	)
	for _, id := range []string{"a", "b", "c"} {
		l := newProvider(t, dir, WithIdentity(id)).Mutex("busy")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				h, err := l.Acquire(wait)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				granted[h.FencingToken()] = id
				mu.Unlock()
				assert.NoError(t, h.Release(ctx))
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var seen []core.Holder
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		default:
		}
		h, held, err := viewer.Holder(ctx)
		require.NoError(t, err)
		if held {
			seen = append(seen, h)
		}
	}
	t.Logf("%d grants, %d held answers", len(granted), len(seen))
	for _, h := range seen {
		assert.Equal(t, granted[h.Token], h.ID, "token %d", h.Token)
	}
}

func TestHolderErrors(t *testing.T) {
	p, err := New(t.TempDir())
	require.NoError(t, err)
	insp := p.Mutex("m").(core.Inspector)
	_, _, err = insp.Holder(nil) //nolint:staticcheck // a nil context is the point
	assert.ErrorIs(t, err, core.ErrInvalidArgument)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = insp.Holder(cancelled)
	assert.ErrorIs(t, err, context.Canceled)

	require.NoError(t, p.Close())
	_, _, err = insp.Holder(context.Background())
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	var ce *core.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "holder", ce.Op)
}

func TestWithIdentity(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		ok       bool
	}{
		{"plain", "worker-7", true},
		{"longest", strings.Repeat("x", MaxIdentity), true},
		{"empty", "", false},
		{"newline", "a\nb", false},
		{"too long", strings.Repeat("x", MaxIdentity+1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(t.TempDir(), WithIdentity(tc.id))
			if !tc.ok {
				assert.ErrorIs(t, err, core.ErrInvalidArgument)
				return
			}
			require.NoError(t, err)
			defer p.Close()
			h, err := p.Mutex("m").TryAcquire(context.Background())
			require.NoError(t, err)
			defer h.Release(context.Background())
			got, held := holderOf(t, p.Mutex("m"))
			assert.True(t, held)
			assert.Equal(t, tc.id, got.ID)
		})
	}
	p, err := New(t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, kit.DefaultIdentity(), p.id)
	require.NoError(t, p.Close())
}

func TestParseRecord(t *testing.T) {
	for _, tc := range []struct {
		rec  string
		want core.Holder
		ok   bool
	}{
		{"a\n1\n", core.Holder{ID: "a", Token: 1}, true},
		{"host-42\n18446744073709551615\n", core.Holder{ID: "host-42", Token: ^uint64(0)}, true},
		{"a\n1", core.Holder{}, false},   // cut short
		{"a\n", core.Holder{}, false},    // cut short
		{"a", core.Holder{}, false},      // cut short
		{"\n1\n", core.Holder{}, false},  // no identity
		{"a\n0\n", core.Holder{}, false}, // tokens start at 1
		{"a\nx\n", core.Holder{}, false},
		{"a\n1\nb\n", core.Holder{}, false},
	} {
		got, ok := parseRecord([]byte(tc.rec))
		assert.Equal(t, tc.ok, ok, "%q", tc.rec)
		assert.Equal(t, tc.want, got, "%q", tc.rec)
	}
}
