package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// session is the Provider's etcd lease. Every key the Provider writes for
// a lock is attached to it, so the keys of a process that dies go when the
// lease expires, and Close frees them all at once by revoking it. The
// Provider's kit.Keeper keeps it alive while any key is attached (see
// renew); a Provider idle for longer than the TTL lets it expire and grants
// a new one at its next acquire.
type session struct {
	id clientv3.LeaseID

	mu        sync.Mutex
	confirmed time.Time // start of the last call that found the lease alive
	dead      bool      // the server said the lease is gone
}

// confirm records that a call started at at found the lease alive: the
// server keeps it until at least at + TTL.
func (s *session) confirm(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at.After(s.confirmed) {
		s.confirmed = at
	}
}

func (s *session) state() (confirmed time.Time, dead bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed, s.dead
}

// trusted reports whether the lease may still be alive at now: the server
// said nothing against it, and its trust window (the last confirmation +
// TTL − margin) is open. A lease past its window is never renewed again,
// even if the server turns out to have kept it (a restart restores leases
// with their full TTL): every grant on it has been lost by then, and the
// keys of the grants not yet released must expire rather than be kept
// alive by the Provider's later grants.
func (s *session) trusted(now time.Time, window time.Duration) bool {
	confirmed, dead := s.state()
	return !dead && now.Before(confirmed.Add(window))
}

func (s *session) kill() {
	s.mu.Lock()
	s.dead = true
	s.mu.Unlock()
}

// lease returns the session a new key is attached to: the current one when
// a keep-alive confirmed it less than freshFor ago, else the current one
// after a keep-alive (one round trip) while it is trusted, else a new
// lease (one round trip). So a grant's trust window, which starts at the
// session's last confirmation, always has at least a renewal interval to
// run.
func (p *Provider) lease(ctx context.Context) (*session, error) {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if p.isClosed.Load() {
		// Close revokes the lease it finds under lmu: no new one after it.
		return nil, ErrClosed
	}
	if s := p.sess; s != nil {
		confirmed, _ := s.state()
		switch now := time.Now(); {
		case !s.trusted(now, p.window):
			s.kill()
		case now.Sub(confirmed) < p.freshFor:
			return s, nil
		default:
			switch err := p.keepAlive(ctx, s); {
			case err == nil:
				return s, nil
			case !errors.Is(err, core.ErrLockLost):
				return nil, err
			}
		}
	}
	start := time.Now()
	g, err := p.cli.Grant(ctx, int64(p.opts.ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("granting a lease: %w", err)
	}
	s := &session{id: g.ID, confirmed: start}
	p.sess = s
	return s, nil
}

// keepAlive renews s's lease: one round trip. It returns an error matching
// core.ErrLockLost when the server no longer knows the lease (it expired or
// was revoked, taking its keys with it), and the client's error when the
// outcome is unknown.
func (p *Provider) keepAlive(ctx context.Context, s *session) error {
	start := time.Now()
	_, err := p.cli.KeepAliveOnce(ctx, s.id)
	switch {
	case err == nil:
		s.confirm(start)
		return nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.kill()
		return fmt.Errorf("%w: lease %x expired or was revoked", core.ErrLockLost, int64(s.id))
	}
	return err
}

// renew is the Keeper's Renew: one keep-alive per lease in the batch, which
// is one round trip for the whole batch unless the Provider has just moved
// to a new lease.
func (p *Provider) renew(ctx context.Context, batch []*kit.Lease) []error {
	errs := make([]error, len(batch))
	done := make(map[*session]error, 1)
	for i, l := range batch {
		s := l.Data.(*handle).s
		err, ok := done[s]
		if !ok {
			err = fmt.Errorf("%w: lease %x not renewed within its trust window", core.ErrLockLost, int64(s.id))
			if s.trusted(time.Now(), p.window) {
				err = p.keepAlive(ctx, s)
			} else {
				s.kill()
			}
			done[s] = err
		}
		errs[i] = err
	}
	return errs
}

// revoke revokes the current lease, bounded by kit.CleanupTimeout: its keys
// are deleted at once, which frees every lock this Provider held or waited
// for.
func (p *Provider) revoke() {
	p.lmu.Lock()
	s := p.sess
	p.sess = nil
	p.lmu.Unlock()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), kit.CleanupTimeout)
	defer cancel()
	if _, err := p.cli.Revoke(ctx, s.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		p.log.Warn("etcdlock: revoking the lease failed; its keys expire with it", "lease", fmt.Sprintf("%x", int64(s.id)), "err", err)
	}
}
