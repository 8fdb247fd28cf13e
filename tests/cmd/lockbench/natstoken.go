package main

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// jsToken is the server-side handover floor on JetStream, what
// listToken is on Redis: a work-queue stream holding one token message per
// lock, read through one pull consumer that every contender shares. A
// waiting Acquire is a pull request, which the server keeps in arrival
// order; a release publishes the token again, and the server delivers it
// to the oldest pull request as it stores it: one stream write and one
// delivery per handover, the least a JetStream lock can spend. No safety
// at all: a holder that dies keeps the token until the consumer's ack
// wait ends; no fencing, no lease.
type jsToken struct {
	js   jetstream.JetStream
	cons jetstream.Consumer
	name string
	subj string
}

// tokenStream holds the tokens of every lock, each under its own subject;
// tokens and consumers left by earlier runs age out.
const tokenStream = "distlock_lockbench_tokens"

// newJSToken makes the lock's stream and consumer (idempotent: every
// contender makes the same) and publishes its one token, once per lock:
// the contender whose KV Create of the init key succeeds does.
func newJSToken(js jetstream.JetStream, kv jetstream.KeyValue, name string) core.Locker {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: tokenStream, Subjects: []string{"lbtok.>"}, Retention: jetstream.WorkQueuePolicy,
		MaxAge: time.Hour, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return kit.FailedLocker(name, err)
	}
	id := fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(name)))
	subj := "lbtok." + id
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "lbtok-" + id, FilterSubject: subj, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 10 * time.Second, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return kit.FailedLocker(name, err)
	}
	if _, err := kv.Create(ctx, "rawtok."+id, []byte("1")); err == nil {
		if _, err := js.Publish(ctx, subj, []byte("t")); err != nil {
			return kit.FailedLocker(name, err)
		}
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return kit.FailedLocker(name, err)
	}
	return jsToken{js: js, cons: cons, name: name, subj: subj}
}

func (t jsToken) Name() string { return t.name }

// take acks the token (which removes it from the work queue) and returns
// the handle whose release publishes it again.
func (t jsToken) take(m jetstream.Msg) (core.Handle, error) {
	if err := m.Ack(); err != nil {
		return nil, err
	}
	return kit.NewHandle(1, func(ctx context.Context) error {
		_, err := t.js.Publish(context.WithoutCancel(ctx), t.subj, []byte("t"))
		return err
	}), nil
}

func (t jsToken) TryAcquire(ctx context.Context) (core.Handle, error) {
	b, err := t.cons.FetchNoWait(1)
	if err != nil {
		return nil, err
	}
	for m := range b.Messages() {
		return t.take(m)
	}
	if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return nil, err
	}
	return nil, core.ErrNotAcquired
}

// Acquire waits in pull requests of a second each, so that the context is
// honoured without abandoning a request the token may be on its way to.
func (t jsToken) Acquire(ctx context.Context) (core.Handle, error) {
	for ctx.Err() == nil {
		m, err := t.cons.Next(jetstream.FetchMaxWait(time.Second))
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return t.take(m)
	}
	return nil, kit.NotAcquired(ctx)
}
