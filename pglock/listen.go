package pglock

import (
	"context"
	"time"

	"github.com/distlock/distlock/core/kit"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// listen starts, once, the goroutine that LISTENs for semaphore releases
// from other processes and wakes this Provider's waiters. It runs until
// Close.
func (p *Provider) listen() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listening || p.closed {
		return
	}
	p.listening = true
	ctx, cancel := context.WithCancel(context.Background())
	p.listenStop = cancel
	go p.listenLoop(ctx)
}

// listenLoop keeps one connection LISTENing on releaseChannel and feeds
// every notification to the Notifier. When the connection fails it wakes
// every waiter (a release may have been missed) and reconnects with
// backoff.
func (p *Provider) listenLoop(ctx context.Context) {
	defer close(p.listenDone)
	for n := 0; ctx.Err() == nil; n++ {
		if err := p.listenOnce(ctx); err == nil {
			n = 0
		} else if ctx.Err() == nil {
			p.log.Warn("distlock: release signal failed; waiters poll until it is back", "backend", backend, "err", err)
		}
		p.sess.Notify.NotifyAll()
		t := time.NewTimer(semBackoff.Delay(n))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// listenOnce runs one LISTEN connection until it fails or ctx ends. It
// returns nil when it got as far as listening.
func (p *Provider) listenOnce(ctx context.Context) error {
	// Cancelling an idle LISTEN has no query to cancel: break the socket
	// at once instead, so that Close does not wait.
	c, err := p.dialWith(ctx, func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), kit.CleanupTimeout)
		defer cancel()
		_ = c.pc.Close(cctx)
	}()
	if _, err := c.pc.Exec(ctx, "LISTEN "+releaseChannel); err != nil {
		return err
	}
	// Releases before the LISTEN took effect were missed.
	p.sess.Notify.NotifyAll()
	p.listenReadyOnce.Do(func() { close(p.listenReady) })
	for {
		n, err := c.pc.WaitForNotification(ctx)
		if err != nil {
			return nil
		}
		p.sess.Notify.Notify(n.Payload)
	}
}
