package polllease

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func names(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return s
}

func loads(a map[string]string) map[string]int {
	l := map[string]int{}
	for _, m := range a {
		l[m]++
	}
	return l
}

func moved(a, b map[string]string) int {
	n := 0
	for t, m := range a {
		if b[t] != m {
			n++
		}
	}
	return n
}

func TestAssignBoundedLoad(t *testing.T) {
	cases := []struct{ targets, members int }{
		{1000, 10}, {100, 10}, {10, 10}, {7, 3}, {1, 5}, {5, 1}, {10000, 7}, {30, 20}, {200, 5}, {50, 5},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%d", c.members, c.targets), func(t *testing.T) {
			targets, members := names("session-", c.targets), names("instance-", c.members)
			a := Assign(targets, members, DefaultLoadFactor)
			require.Len(t, a, c.targets, "every target is assigned")
			limit := Capacity(c.targets, c.members, DefaultLoadFactor)
			floor := Floor(c.targets, c.members, DefaultLoadFactor)
			load := loads(a)
			for m, n := range load {
				assert.LessOrEqual(t, n, limit, "load of %s", m)
				assert.Contains(t, members, m)
			}
			mean := float64(c.targets) / float64(c.members)
			for _, m := range members {
				assert.GreaterOrEqual(t, load[m], floor, "load of %s", m)
				if c.targets >= 10*c.members {
					assert.InDelta(t, mean, float64(load[m]), 0.2*mean, "load of %s within ±20 %% of the mean", m)
				}
			}
		})
	}
}

// TestAssignDeterministic: the order of the slices and duplicates do not
// change the assignment, in cases where the lower bound moves targets too.
func TestAssignDeterministic(t *testing.T) {
	for _, c := range []struct{ targets, members int }{{200, 6}, {50, 5}, {100, 10}} {
		targets, members := names("t", c.targets), names("m", c.members)
		a := Assign(targets, members, DefaultLoadFactor)
		for range 20 {
			shuffled := slices.Clone(targets)
			rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			dup := append(slices.Clone(members), members[0])
			rand.Shuffle(len(dup), func(i, j int) { dup[i], dup[j] = dup[j], dup[i] })
			require.Equal(t, a, Assign(shuffled, dup, DefaultLoadFactor), "%d×%d", c.members, c.targets)
		}
	}
}

func TestAssignEmpty(t *testing.T) {
	assert.Empty(t, Assign(names("t", 3), nil, DefaultLoadFactor))
	assert.Empty(t, Assign(nil, names("m", 3), DefaultLoadFactor))
	assert.Equal(t, "", Preferred("t", nil))
}

// TestAssignChurn checks the churn bounds: a member joining moves at
// most 1.3 × targets/(members+1); a member leaving moves only its own
// targets, give or take the few the load bound shifts (at most 2 %). The
// bounds are statistical: they hold at hundreds of targets per member, not at
// ten (where even plain HRW moves Binomial(T, 1/(M+1)) targets on a join).
func TestAssignChurn(t *testing.T) {
	cases := []struct{ targets, members int }{{1000, 10}, {1000, 5}, {5000, 20}}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%d", c.members, c.targets), func(t *testing.T) {
			for seed := range 5 {
				targets := names(fmt.Sprintf("s%d-target-", seed), c.targets)
				members := names(fmt.Sprintf("s%d-host-", seed), c.members)
				before := Assign(targets, members, DefaultLoadFactor)

				joined := Assign(targets, append(members, "newcomer"), DefaultLoadFactor)
				minimum := float64(c.targets) / float64(c.members+1)
				n := moved(before, joined)
				t.Logf("join: moved %d (minimum %.1f)", n, minimum)
				assert.LessOrEqual(t, float64(n), 1.3*minimum, "join moved too many")

				gone := members[seed%len(members)]
				left := Assign(targets, without(members, gone), DefaultLoadFactor)
				own := loads(before)[gone]
				others := 0
				for tg, m := range before {
					if m != gone && left[tg] != m {
						others++
					}
				}
				t.Logf("leave: %d own targets moved, %d others", own, others)
				assert.LessOrEqual(t, float64(others), 0.02*float64(c.targets), "leave moved others' targets")
			}
		})
	}
}

func without(s []string, x string) []string {
	var out []string
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

func TestPreferredIsUnboundedTop(t *testing.T) {
	members := names("m", 8)
	for _, tg := range names("t", 50) {
		p := Preferred(tg, members)
		for _, m := range members {
			assert.GreaterOrEqual(t, score(p, tg), score(m, tg))
		}
		b := backup(tg, p, members)
		assert.NotEqual(t, p, b)
	}
	assert.Equal(t, "", backup("t", "m", []string{"m"}))
}

func BenchmarkAssign(b *testing.B) {
	targets, members := names("t", 1000), names("m", 10)
	for b.Loop() {
		Assign(targets, members, DefaultLoadFactor)
	}
}

// BenchmarkAssignFrom: a tick's assignment from the owners after an 11th
// member joined 10 × 1,000 (its pool is the joiner's share).
func BenchmarkAssignFrom(b *testing.B) {
	targets, members := names("t", 1000), names("m", 10)
	owners := Assign(targets, members, DefaultLoadFactor)
	joined := append(members, "m10")
	for b.Loop() {
		AssignFrom(targets, joined, owners, DefaultLoadFactor)
	}
}
