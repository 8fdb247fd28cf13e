package redlock

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/distlock/distlock/redislock/redisop"
)

// TestHandoversTrusted: a server's announced handover counts only when
// that server's last call answered with no call in flight since, and its
// token is above the counter in that answer and came after the call was
// sent; the lease starts with the
// earliest of the trusted answers' tries.
func TestHandoversTrusted(t *testing.T) {
	t0 := time.Now()
	c := &calls{seen: []answer{
		{start: t0, counter: 100, ok: true},                       // token not above: made before the answer
		{start: t0.Add(time.Millisecond), counter: 100, ok: true}, // trusted
		{start: t0, counter: 0, ok: false},                        // a call in flight there
		{start: t0.Add(2 * time.Millisecond), counter: 7, ok: true},
		{start: t0, counter: 7, ok: true},           // nothing announced
		{start: t0, counter: 7, ok: true, floor: 9}, // announced before the call was sent
	}}
	toks := []uint64{100, 101, 500, 8, 0, 9}
	turn := &turnHeard{}
	for _, tok := range toks {
		turn.turns = append(turn.turns, func() (bool, uint64) { return tok != 0, tok })
	}
	c.turn = turn
	granted, start := c.handovers()
	assert.Equal(t, map[int]uint64{1: 101, 3: 8}, granted)
	assert.Equal(t, t0.Add(time.Millisecond), start, "the earliest trusted answer's try")

	c.seen[1].ok = false // a try sent there since
	granted, start = c.handovers()
	assert.Equal(t, map[int]uint64{3: 8}, granted)
	assert.Equal(t, t0.Add(2*time.Millisecond), start)
}

// TestYoungAnswerNoBaseline: a young server's busy answer, whose counter
// may have been lost with its data, is no baseline for handovers; an
// error is none either.
func TestYoungAnswerNoBaseline(t *testing.T) {
	tl := &tally{granted: map[int]uint64{}, known: make([]bool, 3), mayHold: make([]bool, 3), reached: make([]bool, 3), counter: make([]uint64, 3)}
	tl.add(reply[redisop.Result]{i: 0, v: redisop.Result{Counter: 5}}, false)
	tl.add(reply[redisop.Result]{i: 1, v: redisop.Result{Counter: 5, Young: time.Second}}, false)
	tl.add(reply[redisop.Result]{i: 2, err: errors.New("down")}, false)
	assert.Equal(t, []bool{true, false, false}, tl.reached)
	assert.Equal(t, uint64(5), tl.counter[0])
}
