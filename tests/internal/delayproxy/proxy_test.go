package delayproxy_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/tests/internal/delayproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// dialEcho connects to an echo server through a proxy delaying each way
// by delay; both are closed when the test ends.
func dialEcho(t *testing.T, delay time.Duration) (net.Conn, *bufio.Reader) {
	t.Helper()
	p, err := delayproxy.Start(echoServer(t), delay)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

func TestRoundTripIsDelayedBothWays(t *testing.T) {
	const delay = 20 * time.Millisecond
	c, r := dialEcho(t, delay)
	for _, msg := range []string{"first\n", "second line\n"} {
		start := time.Now()
		_, err := io.WriteString(c, msg)
		require.NoError(t, err)
		got, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, msg, got, "bytes changed in transit")
		require.GreaterOrEqual(t, time.Since(start), 2*delay, "a round trip shorter than the delay each way")
	}
}

// Pipelined requests overlap their delays: ten lines sent at once come
// back in far less than ten round trips.
func TestPipelinedChunksOverlapTheirDelays(t *testing.T) {
	const delay = 100 * time.Millisecond
	c, r := dialEcho(t, delay)
	start := time.Now()
	for range 10 {
		_, err := io.WriteString(c, "x\n")
		require.NoError(t, err)
		time.Sleep(time.Millisecond) // separate chunks, not one write
	}
	for range 10 {
		got, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "x\n", got)
	}
	require.GreaterOrEqual(t, time.Since(start), 2*delay)
	require.Less(t, time.Since(start), 10*2*delay, "the delays queued one behind the other")
}

// A sub-millisecond delay is never cut short, whatever wakes the writer:
// every round trip of many takes at least the delay each way.
func TestSubMillisecondDelayIsNeverShort(t *testing.T) {
	const delay = 300 * time.Microsecond
	c, r := dialEcho(t, delay)
	for i := range 200 {
		start := time.Now()
		_, err := io.WriteString(c, "x\n")
		require.NoError(t, err)
		_, err = r.ReadString('\n')
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(start), 2*delay, "round trip %d", i)
	}
}

func TestCloseEndsOpenConnections(t *testing.T) {
	p, err := delayproxy.Start(echoServer(t), time.Millisecond)
	require.NoError(t, err)
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "ping\n")
	require.NoError(t, err)
	_, err = bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)

	require.NoError(t, p.Close())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the client's connection outlived the proxy")
}

func TestNegativeDelayIsRefused(t *testing.T) {
	_, err := delayproxy.Start("127.0.0.1:1", -time.Millisecond)
	require.Error(t, err)
}
