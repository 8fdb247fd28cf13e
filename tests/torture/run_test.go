package torture

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// backend says how workers reach a backend under test.
type backend struct {
	kind string        // file, redis, sentinel, redlock, postgres, nats or mysql
	addr string        // directory, address(es) or URL, as open takes it
	ttl  time.Duration // lease TTL; 0 for backends without leases
	// lock is the kind of lock the workers take: mutex (the default),
	// write (an RWMutex's write side) or semaphore (of 1).
	lock string
	// noSemaphore: the backend cannot offer a semaphore (RedLock on
	// several servers).
	noSemaphore bool
	// noRWMutex: the backend cannot offer a reader-writer lock (MySQL).
	noRWMutex bool
}

// name is the backend's name in the summary.
func (b backend) name() string {
	if b.lock == "" || b.lock == "mutex" {
		return b.kind
	}
	return b.kind + "/" + b.lock
}

// run is one torture run: a fenced resource and the worker processes
// hammering one lock.
type run struct {
	t       *testing.T
	b       backend
	res     *resource
	srv     *httptest.Server
	workers []*worker
	start   time.Time
	lock    string // the name of the lock the workers take
}

// worker is a worker process.
type worker struct {
	id    int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *syncBuffer
	done  chan struct{}
	err   error // exit status, once done
}

// syncBuffer collects a worker's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startRun starts n workers on b, on a lock of their own.
func startRun(t *testing.T, b backend, n int) *run {
	t.Helper()
	r := &run{t: t, b: b, res: newResource(), start: time.Now()}
	r.srv = httptest.NewServer(r.res)
	lock := fmt.Sprintf("torture/%s/%d", t.Name(), time.Now().UnixNano())
	r.lock = lock
	for i := range n {
		w := &worker{id: i, out: &syncBuffer{}, done: make(chan struct{})}
		w.cmd = exec.Command(os.Args[0], "-test.run=^$")
		w.cmd.Env = append(os.Environ(),
			envWorker+"="+strconv.Itoa(i),
			envResource+"="+r.srv.URL,
			envBackend+"="+b.kind,
			envAddr+"="+b.addr,
			envTTL+"="+b.ttl.String(),
			envLock+"="+lock,
			envKind+"="+b.lock,
		)
		w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
		stdin, err := w.cmd.StdinPipe()
		require.NoError(t, err)
		w.stdin = stdin
		require.NoError(t, w.cmd.Start())
		go func() {
			w.err = w.cmd.Wait()
			close(w.done)
		}()
		r.workers = append(r.workers, w)
	}
	t.Cleanup(r.kill)
	return r
}

// kill ends every worker still running and the resource server.
func (r *run) kill() {
	for _, w := range r.workers {
		select {
		case <-w.done:
			continue
		default:
		}
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Kill()
		<-w.done
	}
	r.srv.Close()
}

// progress waits until the resource has accepted n more writes than now,
// and fails the test if that takes longer than within.
func (r *run) progress(n int, within time.Duration, after string) {
	r.t.Helper()
	start, _ := r.res.ops()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		ops, changed := r.res.ops()
		if ops >= start+n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			r.t.Fatalf("no progress %s: %d writes in %v, want %d\n%s", after, ops-start, within, n, r.output())
		}
	}
}

// holding makes worker w stay in its next critical section until
// r.res.release(w), or for max at most, and returns once it is in it.
func (r *run) holding(w int, max time.Duration) {
	r.t.Helper()
	select {
	case <-r.res.holdNext(w, max):
	case <-time.After(30 * time.Second):
		r.t.Fatalf("worker %d did not enter its critical section in 30s\n%s", w, r.output())
	}
}

// release lets worker w, held by holding, write, and waits until its
// write reached the resource.
func (r *run) release(w int) {
	r.t.Helper()
	r.res.release(w)
	deadline := time.Now().Add(30 * time.Second)
	for r.res.inSection(w) {
		if time.Now().After(deadline) {
			r.t.Fatalf("worker %d did not write within 30s of its release\n%s", w, r.output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// signal sends sig to worker w.
func (r *run) signal(w int, sig syscall.Signal) {
	r.t.Helper()
	require.NoError(r.t, r.workers[w].cmd.Process.Signal(sig))
}

// live returns the last worker still running, leaving worker 0 (which the
// pause faults use) for last.
func (r *run) live() int {
	r.t.Helper()
	for i := len(r.workers) - 1; i >= 0; i-- {
		select {
		case <-r.workers[i].done:
		default:
			return i
		}
	}
	r.t.Fatal("no worker left")
	return -1
}

// killWorker SIGKILLs worker w, which holds the lock, and waits for it.
func (r *run) killWorker(w int) {
	r.t.Helper()
	r.res.killed(w)
	r.signal(w, syscall.SIGKILL)
	<-r.workers[w].done
}

// stop asks the workers to finish, waits for them and returns the run's
// statistics. Every worker that was not killed must exit cleanly: without
// error and without goroutines left after closing its Provider.
func (r *run) stop() stats {
	r.t.Helper()
	r.res.setStop()
	deadline := time.After(60 * time.Second)
	for _, w := range r.workers {
		select {
		case <-w.done:
		case <-deadline:
			r.t.Errorf("worker %d did not stop within 60s\n%s", w.id, r.output())
			r.kill()
		}
		if w.err != nil && !killed(w.err) {
			r.t.Errorf("worker %d: %v\n%s", w.id, w.err, w.out.String())
		}
	}
	for _, w := range r.workers {
		_ = w.stdin.Close()
	}
	st := r.res.stats()
	st.elapsed = time.Since(r.start)
	return st
}

// killed reports whether a worker's exit error is our SIGKILL.
func killed(err error) bool {
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// output returns the workers' output, for failure messages.
func (r *run) output() string {
	var b bytes.Buffer
	for _, w := range r.workers {
		if s := w.out.String(); s != "" {
			fmt.Fprintf(&b, "--- worker %d:\n%s", w.id, lastLines(s, 20))
		}
	}
	return b.String()
}

func lastLines(s string, n int) string {
	lines := bytes.Split([]byte(s), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
