// Package delayproxy is a TCP proxy that delays every byte it forwards by a
// fixed time in each direction, to measure a client as if a network stood
// between it and its server: a delay of 500 µs adds at least 1 ms to each
// round trip.
//
// Each direction of each connection has its own reader and writer: the
// reader stamps every chunk it reads with its arrival time and the writer
// sends it no earlier than that time plus the delay, so pipelined requests
// overlap their delays as they would on a wire, instead of queueing one
// delay behind the other. On Linux each writer waits on a timerfd of its
// own through the runtime's poller (sleep_linux.go), so waiting writers
// hold no thread and wake within microseconds of their time, as bytes on a
// wire would arrive; elsewhere they sleep on the runtime's timers, which
// round a sub-millisecond wait up to a millisecond or more. Either way the
// added delay is at least the one asked for, never less.
package delayproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards connections accepted on Addr to one upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string
	delay    time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards each connection to
// upstream, delaying each direction by delay.
func Start(upstream string, delay time.Duration) (*Proxy, error) {
	if delay < 0 {
		return nil, errors.New("delayproxy: negative delay")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to instead of the upstream's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every forwarded connection and returns once
// every goroutine of the proxy has ended.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track registers c for Close; it returns false once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(down)
	}
}

// serve forwards one connection both ways until either side closes.
func (p *Proxy) serve(down net.Conn) {
	defer p.wg.Done()
	if !p.track(down) {
		_ = down.Close()
		return
	}
	defer p.untrack(down)
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	for _, c := range []net.Conn{down, up} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
	}
	done := make(chan struct{}, 2)
	go func() { p.pipe(up, down); done <- struct{}{} }()
	go func() { p.pipe(down, up); done <- struct{}{} }()
	<-done // one side ended: closing both ends the other
	p.untrack(up)
	p.untrack(down)
	<-done
}

// chunk is what a reader read and when.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, each chunk no earlier than delay after it was
// read. It returns when src ends or dst fails.
func (p *Proxy) pipe(dst io.WriteCloser, src io.Reader) {
	ch := make(chan chunk, 1024)
	go func() {
		defer close(ch)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				ch <- chunk{b: buf[:n], at: time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	clk := newClock()
	defer func() {
		_ = dst.Close()
		for range ch { // let the reader end once src is closed
		}
		clk.close()
	}()
	for c := range ch {
		if wait := time.Until(c.at.Add(p.delay)); wait > 0 {
			clk.sleep(wait)
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}
