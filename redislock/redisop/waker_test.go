package redisop

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWakerListeningAndExpectTurn: Listening is 0 until the server
// confirmed the subscription on every channel, and a number that stays
// the same while it runs; a turn announced on the inbox after ExpectTurn is
// heard, by a waiter that has not subscribed to its key too; Close ends
// Listening.
func TestWakerListeningAndExpectTurn(t *testing.T) {
	base := newClient(t)
	c := base.WithTicketInbox(base.Channel()+":inbox", 0)
	w := NewWaker(c.Redis(), nil, c.Channel(), c.Inbox())
	defer w.Close()
	require.Zero(t, w.Listening(), "listening before anyone subscribed")

	l := Lock{Kind: KindMutex, Name: t.Name()}
	_, unsubscribe := w.Subscribe(c.WakeKey(l)) // another waiter starts the subscription
	defer unsubscribe()
	require.Eventually(t, func() bool { return w.Listening() != 0 }, 10*time.Second, time.Millisecond)
	live := w.Listening()

	key := c.HandoffKey(l, NewOwner())
	turn, forget := w.ExpectTurn(key)
	defer forget()
	heard := func() bool { h, _ := turn(); return h }
	require.False(t, heard())
	require.NoError(t, c.Redis().Publish(context.Background(), c.Inbox(), key).Err())
	require.Eventually(t, heard, 10*time.Second, time.Millisecond, "the turn was not heard")
	require.NoError(t, c.Redis().Publish(context.Background(), c.Inbox(), key+"#42").Err())
	require.Eventually(t, func() bool { _, tok := turn(); return tok == 42 }, 10*time.Second, time.Millisecond,
		"the handover's token was not heard")
	require.Equal(t, live, w.Listening(), "the subscription changed")

	w.Close()
	require.Zero(t, w.Listening(), "listening after Close")
}
