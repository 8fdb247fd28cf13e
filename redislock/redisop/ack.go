package redisop

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// replicaAck is how a grant is confirmed by replicas: WAIT n timeout on
// the grant's own connection, right after it.
type replicaAck struct {
	n       int
	timeout time.Duration
}

// WithReplicaAck returns a copy of c whose grants (Acquire, DrawToken,
// Confirm) are each followed, in the same pipeline and so on the same
// connection, by WAIT n timeout: a grant counts only once n replicas
// acknowledged it, so a replica promoted by a failover has it. A grant not
// acknowledged in time is given back (released) and reported as an error
// matching core.ErrNotAcquired. Its tokens are also kept above the name's
// durable counter, which each grant raises and WAIT confirms with it
// (withCounter), so they increase across a failover whatever the promoted
// replica's clock says; every Client of a name must then use replica
// acknowledgment, or its grants do not raise the counter. n must be at
// least 1 and timeout positive (core.ErrInvalidArgument otherwise). It
// needs a client bound to one master (a *redis.Client, including
// Sentinel's failover client), not a Cluster client, whose pipeline may
// split the grant from its WAIT, and a timeout shorter than the client's
// read timeout.
func (c *Client) WithReplicaAck(n int, timeout time.Duration) (*Client, error) {
	switch {
	case n < 1:
		return nil, kit.Invalid("replica acknowledgment by %d replicas: at least 1", n)
	case timeout <= 0:
		return nil, kit.Invalid("replica acknowledgment timeout %v must be positive", timeout)
	}
	rc, ok := c.rdb.(*redis.Client)
	if !ok {
		return nil, kit.Invalid("replica acknowledgment needs a client bound to one master (*redis.Client), not %T", c.rdb)
	}
	if rt := rc.Options().ReadTimeout; rt > 0 && timeout >= rt {
		// WAIT blocks its connection: the driver would give up on it first.
		return nil, kit.Invalid("replica acknowledgment timeout %v must be shorter than the client's read timeout %v", timeout, rt)
	}
	cc := *c
	cc.ack = replicaAck{n: n, timeout: timeout}
	return &cc, nil
}

// withCounter returns keys followed by the durable counter of l's name
// under replica acknowledgment, and keys alone otherwise. Every script that
// draws a token then keeps the token above the counter and raises the
// counter to it, in the write that WAIT confirms: a replica promoted by a
// failover has the counter of every acknowledged grant and draws larger
// tokens than all of them, however far its clock is behind the old
// master's. The cost is one key per name that never expires.
func (c *Client) withCounter(l Lock, keys []string) []string {
	if c.ack.n == 0 {
		return keys
	}
	return append(slices.Clip(keys), c.counterKey(l))
}

// acked runs s and then WAIT in one pipeline, s by SHA and, when the server
// does not know it, the pair again with s by source. It returns s's reply
// and the number of replicas that acknowledged it (an error of WAIT, say a
// broken connection, counts as none).
func (c *Client) acked(ctx context.Context, s script, keys []string, args []any) (*redis.Cmd, int) {
	run := func(bySHA bool) (*redis.Cmd, *redis.IntCmd) {
		pipe := c.rdb.Pipeline()
		var cmd *redis.Cmd
		if bySHA {
			cmd = s.EvalSha(ctx, pipe, keys, args...)
		} else {
			cmd = s.Eval(ctx, pipe, keys, args...)
		}
		wait := redis.NewIntCmd(ctx, "wait", c.ack.n, c.ack.timeout.Milliseconds())
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx) // each command carries its own error
		return cmd, wait
	}
	cmd, wait := run(true)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd, wait = run(false)
	}
	return cmd, int(wait.Val())
}

// unacked gives g back after its grant was not acknowledged in time and
// returns the error that reports it.
func (c *Client) unacked(ctx context.Context, g Grant, acks int) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.ack.timeout+time.Second)
	defer cancel()
	_, _ = c.Release(rctx, g)
	return fmt.Errorf("%w: %s %q granted, but acknowledged by %d of %d replicas within %v: given back",
		core.ErrNotAcquired, g.Lock.Kind, g.Lock.Name, acks, c.ack.n, c.ack.timeout)
}

// acquireAcked is Acquire under replica acknowledgment.
func (c *Client) acquireAcked(ctx context.Context, l Lock, owner string, ms int64, wait time.Duration) (Result, error) {
	s, keys, args := c.acquireCall(l, owner, ms, wait, c.inbox)
	cmd, acks := c.acked(ctx, s, keys, args)
	res, err := acquireResult(cmd)
	if err != nil || !res.Acquired || acks >= c.ack.n {
		return res, err
	}
	return Result{}, c.unacked(ctx, Grant{Lock: l, Owner: owner}, acks)
}

// Confirm makes sure that replicas have g, a grant this Client did not
// make itself (a handoff by a release, announced on the Inbox): it extends
// g for ttl and waits for the replicas' acknowledgment of that write, which
// replication delivers after the grant's. Without replica acknowledgment
// it does nothing. It fails with an error matching core.ErrLockLost when g
// is gone, and with one matching core.ErrNotAcquired when the replicas did
// not acknowledge in time (g is then given back).
func (c *Client) Confirm(ctx context.Context, g Grant, ttl time.Duration) error {
	if c.ack.n == 0 {
		return nil
	}
	cmd, acks := c.acked(ctx, scriptKeyExtend, []string{c.Key(g.Lock)}, []any{g.Owner, ttl.Milliseconds()})
	n, err := cmd.Int64()
	switch {
	case err != nil:
		return err
	case n != 1:
		return fmt.Errorf("%w: %s key %s is gone or held by another owner", core.ErrLockLost, g.Lock.Kind, c.Key(g.Lock))
	case acks < c.ack.n:
		return c.unacked(ctx, g, acks)
	}
	return nil
}
