package pglock

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// proxy forwards TCP connections to a server and can freeze them: bytes
// stop flowing both ways but no connection closes, as when a network is
// cut without a reset.
type proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			u.Close()
			return
		}
		p.conns = append(p.conns, c, u)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.frozen && !p.closed {
			p.cond.Wait()
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// A cut network (no reset, no answer) is noticed by the keepalive: every
// handle on the connection is lost within two keepalive periods (plus
// scheduling slack), and the lock frees once the server sees the
// connection end.
func TestNetworkCut(t *testing.T) {
	direct := newPool(t)
	cfg := direct.Config()
	px := newProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, itoa(cfg.ConnConfig.Port)))
	host, port, err := net.SplitHostPort(px.addr())
	require.NoError(t, err)
	cut := newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.Host = host
		c.ConnConfig.Port = uint16(atoi(t, port))
		c.ConnConfig.TLSConfig = nil
		c.ConnConfig.Fallbacks = nil
	})
	p := newProviderOn(t, cut)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := uniqueName(t, "x")
	h, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)

	px.freeze()
	start := time.Now()
	require.True(t, waitDone(h.Context(), 3*testKeepalive), "not lost within 2 × keepalive (+1 slack)")
	assert.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	t.Logf("lost after %v", time.Since(start))
	require.NoError(t, h.Release(ctx))

	px.close() // the network comes back with a reset: the server ends the session
	h2, err := newProvider(t).Mutex(name).Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, h2.Release(ctx))
}
