package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/natslock"
)

// natsCases returns the contenders for the NATS JetStream KV backend, or an
// error if DISTLOCK_NATS_URL is unset.
//
//   - natslock: this repository's backend (watch-driven waiting, leases,
//     revision fencing).
//   - nats-kv-raw: the raw floor, what a user writes by hand on the KV API:
//     Create to take, Delete with the last revision to give back, and a
//     waiting Acquire that retries Create every millisecond. No lease renewal
//     (the bucket's TTL outlives a run).
//   - "raw JetStream token": the server-side handover floor (jsToken).
func natsCases() ([]benchCase, func(), error) {
	url := os.Getenv("DISTLOCK_NATS_URL")
	if url == "" {
		return nil, nil, errors.New("DISTLOCK_NATS_URL is not set")
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	const bucket, ttl = "distlock_lockbench", 30 * time.Second
	p, err := natslock.New(js, natslock.WithBucket(bucket), natslock.WithTTL(ttl))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		_ = p.Close()
		nc.Close()
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	cleanup := func() {
		_ = p.Close()
		nc.Close()
	}
	return []benchCase{
		{Name: "natslock", New: func(name string) core.Locker { return p.Mutex(name) }},
		{Name: "nats-kv-raw", New: func(name string) core.Locker { return rawKV{kv: kv, name: name, key: "raw." + kit.SafeName(name)} }},
		{Name: "raw JetStream token", New: func(name string) core.Locker { return newJSToken(js, kv, name) }},
	}, cleanup, nil
}

// rawKV is the raw floor: the KV calls a hand-written lock makes.
type rawKV struct {
	kv   jetstream.KeyValue
	name string
	key  string
}

func (r rawKV) Name() string { return r.name }

func (r rawKV) TryAcquire(ctx context.Context) (core.Handle, error) {
	rev, err := r.kv.Create(ctx, r.key, []byte("held"))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil, kit.Busy("key exists")
	}
	if err != nil {
		return nil, err
	}
	return kit.NewHandle(rev, func(ctx context.Context) error {
		return r.kv.Delete(ctx, r.key, jetstream.LastRevision(rev))
	}), nil
}

func (r rawKV) Acquire(ctx context.Context) (core.Handle, error) {
	return pollEvery1ms(ctx, r.TryAcquire)
}
