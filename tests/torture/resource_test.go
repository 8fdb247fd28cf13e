package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// section is one critical section as the resource saw it, on its event
// clock: from the worker's first request (enter) to its write, or to its
// death.
type section struct {
	worker     int
	token      uint64
	start, end uint64 // event numbers; end is 0 while the section is open
	wrote      bool   // its write was accepted
	refused    bool   // its write was refused as stale
}

// enterReply answers /enter.
type enterReply struct {
	OK    bool  `json:"ok"`    // false: the token is stale, do not write
	Value int64 `json:"value"` // the counter
	Hold  bool  `json:"hold"`  // call /hold before writing
	Stop  bool  `json:"stop"`  // release and exit
}

// resource is the fenced counter the workers update. It is an
// http.Handler.
type resource struct {
	mu          sync.Mutex
	clock       uint64 // event clock: one tick per request
	value       int64
	highest     uint64
	accepted    int // writes accepted
	lost        int // accepted writes whose value was not value+1
	staleEnters int
	staleWrites int
	reused      int // tokens granted to two sections
	examples    []string
	tokens      map[uint64]int
	sections    []*section
	open        map[int]*section
	holds       map[int]hold // to start at the worker's next enter
	holding     map[int]hold // started
	stop        bool
	changed     chan struct{} // closed and replaced on every accepted write
}

// hold keeps a worker in its next critical section: entered is closed once
// it is in it; /hold returns when release is closed or after max.
type hold struct {
	max     time.Duration
	entered chan struct{}
	release chan struct{}
}

func newResource() *resource {
	return &resource{
		tokens:  make(map[uint64]int),
		open:    make(map[int]*section),
		holds:   make(map[int]hold),
		holding: make(map[int]hold),
		changed: make(chan struct{}),
	}
}

func (r *resource) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	worker, _ := strconv.Atoi(q.Get("w"))
	token, _ := strconv.ParseUint(q.Get("t"), 10, 64)
	switch req.URL.Path {
	case "/enter":
		_ = json.NewEncoder(w).Encode(r.enter(worker, token))
	case "/write":
		v, _ := strconv.ParseInt(q.Get("v"), 10, 64)
		if !r.write(worker, token, v) {
			http.Error(w, "stale fencing token", http.StatusConflict)
		}
	case "/hold":
		r.hold(req.Context(), worker)
	case "/stop":
		r.mu.Lock()
		stop := r.stop
		r.mu.Unlock()
		_ = json.NewEncoder(w).Encode(enterReply{Stop: stop})
	default:
		http.NotFound(w, req)
	}
}

// closeLocked ends worker's open section, if any, at the current event.
func (r *resource) closeLocked(worker int) *section {
	s := r.open[worker]
	if s != nil {
		s.end = r.clock
		delete(r.open, worker)
	}
	return s
}

func (r *resource) enter(worker int, token uint64) enterReply {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock++
	r.closeLocked(worker) // a section whose write never arrived
	if r.stop {
		return enterReply{Stop: true}
	}
	if token < r.highest {
		r.staleEnters++
		return enterReply{}
	}
	if prev, dup := r.tokens[token]; dup {
		r.reused++
		if len(r.examples) < 5 {
			r.examples = append(r.examples, fmt.Sprintf("token %d granted to worker %d and again to worker %d (event %d)", token, prev, worker, r.clock))
		}
	}
	r.tokens[token] = worker
	r.highest = token
	s := &section{worker: worker, token: token, start: r.clock}
	r.sections = append(r.sections, s)
	r.open[worker] = s
	reply := enterReply{OK: true, Value: r.value}
	if h, ok := r.holds[worker]; ok {
		delete(r.holds, worker)
		r.holding[worker] = h
		reply.Hold = true
		close(h.entered)
	}
	return reply
}

func (r *resource) write(worker int, token uint64, v int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock++
	s := r.open[worker]
	if s == nil || s.token != token {
		// Not in a section the resource knows: a write without a read.
		r.staleWrites++
		return false
	}
	r.closeLocked(worker)
	if token < r.highest {
		r.staleWrites++
		s.refused = true
		return false
	}
	if v != r.value+1 {
		r.lost++
	}
	r.value = v
	r.accepted++
	s.wrote = true
	close(r.changed)
	r.changed = make(chan struct{})
	return true
}

// holdNext makes worker stay in its next critical section until release
// is called, or for max at most. The returned channel is closed once the
// worker is in it.
func (r *resource) holdNext(worker int, max time.Duration) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := hold{max: max, entered: make(chan struct{}), release: make(chan struct{})}
	r.holds[worker] = h
	return h.entered
}

// hold blocks a held worker's /hold request until the worker is released
// or gone (ctx done).
func (r *resource) hold(ctx context.Context, worker int) {
	r.mu.Lock()
	h, ok := r.holding[worker]
	r.mu.Unlock()
	if !ok {
		return
	}
	t := time.NewTimer(h.max)
	defer t.Stop()
	select {
	case <-h.release:
	case <-t.C:
	case <-ctx.Done():
	}
}

// release lets a held worker write.
func (r *resource) release(worker int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.holding[worker]; ok {
		delete(r.holding, worker)
		close(h.release)
	}
}

// inSection reports whether worker has a critical section open.
func (r *resource) inSection(worker int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open[worker] != nil
}

// killed ends worker's open section now: the caller is about to kill it.
func (r *resource) killed(worker int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock++
	r.closeLocked(worker)
	delete(r.holds, worker)
	if h, ok := r.holding[worker]; ok {
		delete(r.holding, worker)
		close(h.release)
	}
}

// setStop tells the workers to exit at their next request.
func (r *resource) setStop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stop = true
	for w, h := range r.holding {
		delete(r.holding, w)
		close(h.release)
	}
}

// ops returns the number of accepted writes and a channel closed at the
// next one.
func (r *resource) ops() (int, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted, r.changed
}

// stats is the outcome of a run.
type stats struct {
	ops         int // accepted writes
	overlaps    int // pairs of critical sections open at once
	uncaught    int // overlaps whose older holder's write was accepted
	staleEnters int
	staleWrites int
	lost        int // lost updates
	reused      int // tokens granted twice
	// examples describe the first few violations, for failure messages.
	examples []string
	elapsed  time.Duration // the run's wall time, workers' start to stop
}

// rate is accepted writes per second over the whole run, faults included.
func (s stats) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.ops) / s.elapsed.Seconds()
}

func (s stats) stale() int { return s.staleEnters + s.staleWrites }

// stats analyses the record. Call it once the workers are gone.
func (r *resource) stats() stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock++
	for w := range r.open {
		r.closeLocked(w)
	}
	st := stats{
		ops:         r.accepted,
		staleEnters: r.staleEnters,
		staleWrites: r.staleWrites,
		lost:        r.lost,
		reused:      r.reused,
		examples:    append([]string(nil), r.examples...),
	}
	// An accepted write not based on the counter's latest value lost the
	// increments between; counting them from the final value too would
	// count them twice.
	st.lost = max(st.lost, int(int64(r.accepted)-r.value))
	secs := append([]*section(nil), r.sections...)
	sort.Slice(secs, func(i, j int) bool { return secs[i].start < secs[j].start })
	for i, a := range secs {
		for _, b := range secs[i+1:] {
			if b.start > a.end {
				break
			}
			st.overlaps++
			older := a
			if b.token < a.token {
				older = b
			}
			if older.wrote {
				st.uncaught++
				if len(st.examples) < 5 {
					st.examples = append(st.examples, fmt.Sprintf(
						"worker %d (token %d, events %d-%d) and worker %d (token %d, events %d-%d) overlapped and both wrote",
						a.worker, a.token, a.start, a.end, b.worker, b.token, b.start, b.end))
				}
			}
		}
	}
	return st
}
