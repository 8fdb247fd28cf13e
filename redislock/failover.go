package redislock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
)

// transient reports whether err says the server could not be reached or
// cannot serve writes for now, as during a failover or a restart: the
// connection broke or was refused, the server is loading its data, or it
// was demoted to a replica (READONLY) or lost its master (MASTERDOWN). A
// reply of the server to the script (a wrong type, a script error) is not
// transient, and neither is a closed client.
func transient(err error) bool {
	if err == nil || errors.Is(err, redis.ErrClosed) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	for _, prefix := range []string{"READONLY", "LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// rideThrough makes an attempt of a waiting Acquire treat a transient
// error as a busy lock: the waiter tries again on the same backoff, within
// its context, instead of failing while the server fails over or restarts.
// A grant whose reply was lost is not lost with it: the next try, with the
// same owner value, claims it.
func rideThrough(try kit.Attempt) kit.Attempt {
	return func(ctx context.Context) (core.Handle, time.Duration, error) {
		h, retryIn, err := try(ctx)
		if transient(err) && ctx.Err() == nil {
			return nil, 0, fmt.Errorf("%w: server unavailable, trying again: %w", core.ErrNotAcquired, err)
		}
		return h, retryIn, err
	}
}

// handedByServer takes a grant a release on the server handed to a waiter
// of this Provider, announced with its token, after confirming it with the
// replicas when WithReplicaAck asks for it.
func (p *Provider) handedByServer(ctx context.Context, g redisop.Grant, token uint64, start time.Time) (core.Handle, time.Duration, error) {
	err := p.client.Confirm(ctx, g, p.cfg.ttl)
	if errors.Is(err, core.ErrLockLost) {
		// It expired before we took it: wait on, as for a busy lock.
		err = kit.Busy("handed %s, gone before it was confirmed: %v", g.Lock.Kind, err)
	}
	if err != nil {
		return nil, 0, kit.Wrap(backend, "acquire", g.Lock.Name, err)
	}
	h := p.newHandle(g, token, start)
	h.HandedByServer()
	return h, 0, nil
}
