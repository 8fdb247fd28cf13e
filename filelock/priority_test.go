package filelock

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// countingTry is an attempt that always finds the lock busy and counts the
// times it ran.
func countingTry(n *int) kit.Attempt {
	return func(context.Context) (core.Handle, time.Duration, error) {
		*n++
		return nil, 0, core.ErrNotAcquired
	}
}

func TestPriority(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.prio")

	t.Run("no claims: every wake tries", func(t *testing.T) {
		pr := priority{path: path}
		defer pr.done()
		tries := 0
		try := pr.wrap(countingTry(&tries))
		for range 5 {
			_, _, err := try(ctx)
			require.ErrorIs(t, err, core.ErrNotAcquired)
		}
		assert.Equal(t, 5, tries)
	})

	t.Run("losers claim priority and others defer to them", func(t *testing.T) {
		loser := priority{path: path}
		lt := 0
		loserTry := loser.wrap(countingTry(&lt))
		for range 1 + starveAfter { // the first try is not a lost race
			_, _, _ = loserTry(ctx)
		}
		require.True(t, loser.claiming)

		other := priority{path: path}
		defer other.done()
		ot := 0
		otherTry := other.wrap(countingTry(&ot))
		_, _, _ = otherTry(ctx) // first try of an Acquire: always goes ahead
		assert.Equal(t, 1, ot)
		for range starveAfter {
			_, _, err := otherTry(ctx)
			assert.ErrorIs(t, err, core.ErrNotAcquired)
		}
		assert.Equal(t, 1, ot, "deferred to the claimant")
		_, _, _ = otherTry(ctx)
		assert.Equal(t, 2, ot, "a stuck claimant delays others only starveAfter times in a row")

		loser.done()
		// other has now lost twice itself and may claim; a third waiter
		// sees that claim. Without it, nobody defers.
		other.done()
		third := priority{path: path}
		defer third.done()
		tt := 0
		thirdTry := third.wrap(countingTry(&tt))
		_, _, _ = thirdTry(ctx)
		_, _, _ = thirdTry(ctx)
		assert.Equal(t, 2, tt, "claims end with the wait")
	})

	t.Run("no priority file: no priority", func(t *testing.T) {
		pr := priority{path: filepath.Join(t.TempDir(), "file", "x.prio")}
		require.NoError(t, os.WriteFile(filepath.Dir(pr.path), nil, 0o644))
		tries := 0
		try := pr.wrap(countingTry(&tries))
		for range 4 {
			_, _, _ = try(ctx)
		}
		assert.Equal(t, 4, tries)
		assert.False(t, pr.claiming)
		pr.done()
	})
}
