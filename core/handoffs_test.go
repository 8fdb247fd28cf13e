package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestHandoffsLine(t *testing.T) {
	var hs Handoffs[*int, string]
	a, first := hs.Enqueue("k", "a")
	require.True(t, first)
	assert.True(t, isClosed(a.Turn()))
	b, first := hs.Enqueue("k", "b")
	require.False(t, first)
	assert.False(t, isClosed(b.Turn()))
	assert.Equal(t, 2, hs.Len("k"))
	tag, ok := hs.First("k")
	assert.True(t, ok)
	assert.Equal(t, "a", tag)

	// Only the first, idle waiter can be claimed, once.
	require.Same(t, a, hs.Claim("k"))
	assert.Nil(t, hs.Claim("k"))
	assert.False(t, hs.Away(a), "a claimed waiter must wait for its handoff")
	require.True(t, hs.Deliver(a, "grant"))
	h, ok, next := hs.Take("k", a)
	require.True(t, ok)
	assert.Equal(t, "grant", h)
	assert.True(t, next)
	assert.True(t, isClosed(b.Turn()), "b moved up")

	// An away waiter is not claimed until it is back.
	require.True(t, hs.Away(b))
	assert.Nil(t, hs.Claim("k"))
	hs.Back(b)
	require.Same(t, b, hs.Claim("k"))
	hs.Unclaim(b)
	require.Same(t, b, hs.Claim("k"))

	// A waiter that leaves after its delivery gets the grant; one that
	// left before makes the delivery fail.
	require.True(t, hs.Deliver(b, "late"))
	h, ok, next = hs.Leave("k", b)
	assert.True(t, ok)
	assert.Equal(t, "late", h)
	assert.False(t, next)
	assert.False(t, hs.Deliver(b, "again"))
	assert.Zero(t, hs.Len("k"))
	_, ok = hs.First("k")
	assert.False(t, ok)
}

func TestHandoffsHolder(t *testing.T) {
	var hs Handoffs[*int, string]
	x, y := new(int), new(int)
	_, ok := hs.Holder("k")
	assert.False(t, ok)
	hs.SetHolder("k", x)
	hs.SetHolder("k", y)
	hs.DropHolder("k", x) // no longer the holder: nothing happens
	got, ok := hs.Holder("k")
	require.True(t, ok)
	assert.Same(t, y, got)
	hs.DropHolder("k", y)
	_, ok = hs.Holder("k")
	assert.False(t, ok)
}
