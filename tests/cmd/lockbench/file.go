package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/gofrs/flock"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/filelock"
)

// fileDirEnv names the directory of the file cases: the first lockbench
// process makes it and sets the variable, which its worker processes
// inherit, so that all of them lock the same files.
const fileDirEnv = "LOCKBENCH_FILE_DIR"

// fileCases: filelock against the obvious hand-written alternative, a
// gofrs/flock TryLock loop that sleeps 1 ms between tries. Both use a
// temporary directory; each worker gets its own Provider, as separate
// processes would.
func fileCases() ([]benchCase, func(), error) {
	dir, owned := os.Getenv(fileDirEnv), false
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "lockbench-file-"); err != nil {
			return nil, nil, err
		}
		if err := os.Setenv(fileDirEnv, dir); err != nil {
			return nil, nil, err
		}
		owned = true
	}
	var providers []*filelock.Provider
	cleanup := func() {
		for _, p := range providers {
			_ = p.Close()
		}
		if owned {
			_ = os.RemoveAll(dir)
		}
	}
	return []benchCase{
		{Name: "file: flock + 1ms sleep-poll", New: func(name string) core.Locker {
			return &pollFlock{name: name, path: filepath.Join(dir, "poll-"+kit.SafeName(name))}
		}},
		{Name: "file: filelock", New: func(name string) core.Locker {
			p, err := filelock.New(filepath.Join(dir, "filelock"))
			if err != nil {
				panic(err) // a temp dir we just made
			}
			providers = append(providers, p)
			return p.Mutex(name)
		}},
	}, cleanup, nil
}

// pollFlock is the floor: flock on one file, retried every millisecond.
type pollFlock struct {
	name, path string
}

func (l *pollFlock) Name() string { return l.name }

func (l *pollFlock) TryAcquire(ctx context.Context) (core.Handle, error) {
	f := flock.New(l.path)
	ok, err := f.TryLock()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, core.ErrNotAcquired
	}
	return kit.NewHandle(1, func(context.Context) error { return f.Close() }), nil
}

func (l *pollFlock) Acquire(ctx context.Context) (core.Handle, error) {
	return pollEvery1ms(ctx, l.TryAcquire)
}
