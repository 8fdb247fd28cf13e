package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestHandoversTrusted: a server's announced handover counts only when
// that server's last call answered with no call in flight since, and its
// token is above the counter in that answer; the lease starts with the
// earliest of the trusted answers' tries.
func TestHandoversTrusted(t *testing.T) {
	t0 := time.Now()
	c := &calls{seen: []answer{
		{start: t0, counter: 100, ok: true},                       // token not above: made before the answer
		{start: t0.Add(time.Millisecond), counter: 100, ok: true}, // trusted
		{start: t0, counter: 0, ok: false},                        // a call in flight there
		{start: t0.Add(2 * time.Millisecond), counter: 7, ok: true},
		{start: t0, counter: 7, ok: true}, // nothing announced
	}}
	toks := []uint64{100, 101, 500, 8, 0}
	turn := &turnHeard{}
	for _, tok := range toks {
		turn.turns = append(turn.turns, func() (bool, uint64) { return tok != 0, tok })
	}
	granted, start := c.handovers(turn)
	assert.Equal(t, map[int]uint64{1: 101, 3: 8}, granted)
	assert.Equal(t, t0.Add(time.Millisecond), start, "the earliest trusted answer's try")

	c.seen[1].ok = false // a try sent there since
	granted, start = c.handovers(turn)
	assert.Equal(t, map[int]uint64{3: 8}, granted)
	assert.Equal(t, t0.Add(2*time.Millisecond), start)
}
