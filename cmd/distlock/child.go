package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// relay owns SIGINT and SIGTERM for the whole invocation: while CMD runs
// it forwards them to CMD, which decides when to exit; otherwise it ends
// the invocation's context with the signal as the cause.
type relay struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	ch     chan os.Signal
	done   chan struct{}

	mu   sync.Mutex
	proc *os.Process // CMD while it runs
	got  os.Signal   // the last signal received
}

// signalled is the cause of a context a signal ended.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return "got " + s.sig.String() }

func newRelay() *relay {
	r := &relay{ch: make(chan os.Signal, 4), done: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	signal.Notify(r.ch, os.Interrupt, syscall.SIGTERM)
	go r.loop()
	return r
}

func (r *relay) loop() {
	defer close(r.done)
	for sig := range r.ch {
		r.mu.Lock()
		r.got = sig
		if r.proc != nil {
			_ = r.proc.Signal(sig)
		} else {
			r.cancel(signalled{sig})
		}
		r.mu.Unlock()
	}
}

// stop stops taking signals and waits for the relay's goroutine.
func (r *relay) stop() {
	signal.Stop(r.ch)
	close(r.ch)
	<-r.done
	r.cancel(nil)
}

// setProc records the running CMD, or nil once it has exited.
func (r *relay) setProc(p *os.Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.proc = p
}

// signal returns the last signal received, or nil.
func (r *relay) signal() os.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}

// signalStatus is the exit status of a process ended by sig: 128+N.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitError
}

// start starts argv with env added to distlock's environment, as the
// relay's CMD. It returns 126 or 127, reported on stderr, when argv cannot
// run, and 128+N when signal N came first.
func (c *cli) start(r *relay, argv, env []string) (*exec.Cmd, int) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.stdout, c.stderr
	cmd.Env = append(os.Environ(), env...)
	setDeathSignal(cmd)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil { // a signal came before CMD could get it
		return nil, signalStatus(r.got)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(c.stderr, "distlock: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return nil, exitNotFound
		}
		return nil, exitCannotRun
	}
	r.proc = cmd.Process
	c.log.Debug("started", "cmd", argv, "pid", cmd.Process.Pid)
	return cmd, 0
}

// supervise waits for cmd to exit and returns its exit status (128+N when
// signal N ended it). When stop is done first, it sends cmd SIGTERM, then
// SIGKILL after grace, and reports stopped.
func (c *cli) supervise(r *relay, cmd *exec.Cmd, stop <-chan struct{}, grace time.Duration) (status int, stopped bool) {
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		r.setProc(nil)
		close(exited)
	}()
	select {
	case <-exited:
	case <-stop:
		stopped = true
		c.log.Debug("stopping", "pid", cmd.Process.Pid, "grace", grace)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-exited:
		case <-t.C:
			c.log.Debug("killing", "pid", cmd.Process.Pid)
			_ = cmd.Process.Kill()
			<-exited
		}
		t.Stop()
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal()), stopped
	}
	return cmd.ProcessState.ExitCode(), stopped
}
