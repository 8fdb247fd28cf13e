package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// procsConfig configures the multi-process mode.
type procsConfig struct {
	workers  int
	rounds   int
	duration time.Duration
}

// runProcs is the multi-process mode: for every case, each round runs
// cfg.workers worker processes (lockbench re-executed, one Provider or
// client each, as separate services would) for cfg.duration and measures
// the lock's handover from their hold intervals. The cases take turns
// within each round, each round starting at the next case.
func runProcs(cases []benchCase, cfg procsConfig) {
	results := make([][]roundResult, len(cases))
	for round := range cfg.rounds {
		for k := range cases {
			i := (round + k) % len(cases)
			c := cases[i]
			lock := fmt.Sprintf("lockbench/mp/%s/%08x", c.Name, rand.Uint32())
			r, err := runProcsRound(c, lock, cfg)
			if err != nil {
				fail(c, err)
			}
			results[i] = append(results[i], r)
			fmt.Fprintf(os.Stderr, "round %d %-28s %s\n", round+1, c.Name, r)
		}
	}
	printProcsTable(cases, results, cfg)
}

// worker is one running worker process.
type worker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// runProcsRound starts the workers, waits until all are ready, gives them
// one window, collects their reports and analyses them.
func runProcsRound(c benchCase, lock string, cfg procsConfig) (roundResult, error) {
	self, err := os.Executable()
	if err != nil {
		return roundResult{}, err
	}
	ws := make([]*worker, 0, cfg.workers)
	defer func() { // on success every worker has exited already
		for _, w := range ws {
			_ = w.in.Close()
			if w.cmd.ProcessState == nil {
				_ = w.cmd.Process.Kill()
				_ = w.cmd.Wait()
			}
		}
	}()
	for range cfg.workers {
		w, err := startWorker(self, c, lock)
		if err != nil {
			return roundResult{}, err
		}
		ws = append(ws, w)
	}
	for i, w := range ws {
		line, err := w.out.ReadString('\n')
		if line != "ready\n" {
			return roundResult{}, fmt.Errorf("worker %d not ready: %q %v", i, line, err)
		}
	}
	start := time.Now().Add(20 * time.Millisecond)
	win := window{Start: start.UnixNano(), End: start.Add(cfg.duration).UnixNano()}
	for _, w := range ws {
		if err := json.NewEncoder(w.in).Encode(win); err != nil {
			return roundResult{}, err
		}
	}
	reports := make([]workerReport, len(ws))
	var errs []error
	for i, w := range ws {
		if err := json.NewDecoder(w.out).Decode(&reports[i]); err != nil {
			errs = append(errs, fmt.Errorf("worker %d report: %w", i, err))
		} else if reports[i].Err != "" {
			errs = append(errs, fmt.Errorf("worker %d: %s", i, reports[i].Err))
		}
		if err := w.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("worker %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return roundResult{}, err
	}
	return analyse(reports, win), nil
}

func startWorker(self string, c benchCase, lock string) (*worker, error) {
	cmd := exec.Command(self, "-worker", "-worker-source", strconv.Itoa(c.src),
		"-worker-case", c.Name, "-worker-lock", lock)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &worker{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}
