package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/etcdlock"
)

// etcdCases returns the contenders on the etcd member(s) of
// DISTLOCK_ETCD_ENDPOINTS, or an error if it is unset:
//
//   - etcdlock: this repository's backend, one Provider (one lease) shared
//     by every Locker.
//   - etcd concurrency.Mutex: etcd's own client/v3/concurrency recipe on
//     the same client, one Session (one lease) per Locker, since a
//     Session's Mutex is one key per lease and cannot be shared by
//     goroutines; TryAcquire is TryLock, Acquire is Lock. Its token is the
//     key's create revision, as etcdlock's.
func etcdCases() ([]benchCase, func(), error) {
	eps := os.Getenv("DISTLOCK_ETCD_ENDPOINTS")
	if eps == "" {
		return nil, nil, errors.New("DISTLOCK_ETCD_ENDPOINTS is not set")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(eps, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, fmt.Errorf("etcd: %w", err)
	}
	p, err := etcdlock.New(cli, etcdlock.WithPrefix("lockbench/"), etcdlock.WithTTL(benchTTL))
	if err != nil {
		_ = cli.Close()
		return nil, nil, err
	}
	var mu sync.Mutex
	var sessions []*concurrency.Session
	cleanup := func() {
		_ = p.Close()
		mu.Lock()
		for _, s := range sessions {
			_ = s.Close()
		}
		mu.Unlock()
		_ = cli.Close()
	}
	newMutex := func(name string) core.Locker {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(benchTTL/time.Second)))
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockbench: etcd session:", err)
			os.Exit(1)
		}
		mu.Lock()
		sessions = append(sessions, s)
		mu.Unlock()
		return etcdMutex{m: concurrency.NewMutex(s, "lockbench-concurrency/"+kit.SafeName(name)), name: name}
	}
	return []benchCase{
		{Name: "etcdlock", New: func(name string) core.Locker { return p.Mutex(name) }},
		{Name: "etcd concurrency.Mutex", New: newMutex},
	}, cleanup, nil
}

// etcdMutex adapts a concurrency.Mutex. It holds one grant at a time, as
// one worker does.
type etcdMutex struct {
	m    *concurrency.Mutex
	name string
}

func (l etcdMutex) Name() string { return l.name }

func (l etcdMutex) handle() core.Handle {
	return kit.NewHandle(uint64(l.m.Header().Revision), l.m.Unlock)
}

func (l etcdMutex) TryAcquire(ctx context.Context) (core.Handle, error) {
	err := l.m.TryLock(ctx)
	if errors.Is(err, concurrency.ErrLocked) {
		return nil, fmt.Errorf("%w: %w", core.ErrNotAcquired, err)
	}
	if err != nil {
		return nil, err
	}
	return l.handle(), nil
}

func (l etcdMutex) Acquire(ctx context.Context) (core.Handle, error) {
	if err := l.m.Lock(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, kit.NotAcquired(ctx)
		}
		return nil, err
	}
	return l.handle(), nil
}
