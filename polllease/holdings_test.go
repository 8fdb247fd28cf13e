package polllease

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
)

func TestHoldingsRoundTrip(t *testing.T) {
	held := map[string]uint64{"t1": 1, "t2": 1 << 40, "t3": 0, "t4": ^uint64(0)}
	b := encodeHoldings(held)
	got := map[uint64]uint64{}
	for _, h := range decodeHoldings(b) {
		got[h.key] = h.token
	}
	require.Len(t, got, len(held))
	for tg, tok := range held {
		assert.Equal(t, tok, got[targetKey(tg)], tg)
	}
	assert.Empty(t, decodeHoldings(nil), "an empty value names nothing")
	assert.Empty(t, decodeHoldings([]byte{2, 0, 0}), "another format names nothing")
	assert.Empty(t, decodeHoldings(b[:len(b)-1]), "a value cut short names nothing")
	assert.Equal(t, []byte{holdingsV1}, encodeHoldings(nil))
}

// TestHoldingsCap: an instance holding more than fits announces
// maxHoldings of them, within core.MaxMemberValue.
func TestHoldingsCap(t *testing.T) {
	held := map[string]uint64{}
	for i := range maxHoldings + 100 {
		held[fmt.Sprintf("target-%d", i)] = ^uint64(0)
	}
	b := encodeHoldings(held)
	assert.LessOrEqual(t, len(b), core.MaxMemberValue)
	assert.Len(t, decodeHoldings(b), maxHoldings)
}

// TestOwnersOf: the owner of a target two members announce is the one with
// the higher token (the later grant); this instance owns what it holds
// whatever the others announce; announcements of targets outside the set
// and of members that announce nothing count for nothing.
func TestOwnersOf(t *testing.T) {
	targets := map[string]bool{"a": true, "b": true, "c": true, "d": true}
	members := []core.Member{
		{ID: "m1", Value: encodeHoldings(map[string]uint64{"a": 5, "b": 9, "gone": 1})},
		{ID: "m2", Value: encodeHoldings(map[string]uint64{"a": 7, "c": 2})},
		{ID: "m3"},
		{ID: "self", Value: encodeHoldings(map[string]uint64{"b": 1})},
	}
	got := ownersOf(targets, members, "self", map[string]uint64{"c": 1})
	assert.Equal(t, map[string]string{"a": "m2", "b": "m1", "c": "self"}, got)
}

// TestAssignFromChurn runs a fleet through random joins, leaves, and
// targets added and removed, each step assigned from the last: every
// member stays within [Floor, Capacity], an unchanged fleet moves nothing,
// a join moves exactly the strict minimum, and a leave moves no target of
// a member that stays unless the leaver's targets were too few to bring
// the others up to Floor.
func TestAssignFromChurn(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	members, targets := names("m", 6), names("t", 150)
	next := 150
	owners := Assign(targets, members, DefaultLoadFactor)
	for step := range 400 {
		var after map[string]string
		switch k := r.IntN(4); {
		case k == 0 && len(members) < 14:
			joined := append(slices.Clone(members), fmt.Sprintf("j%d", step))
			after = AssignFrom(targets, joined, owners, DefaultLoadFactor)
			assert.Equal(t, strictMinimum(owners, len(targets), len(members), DefaultLoadFactor), moved(owners, after), "step %d: join", step)
			members = joined
		case k == 1 && len(members) > 2:
			gone := members[r.IntN(len(members))]
			members = slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == gone })
			after = AssignFrom(targets, members, owners, DefaultLoadFactor)
			others := 0
			for tg, m := range owners {
				if m != gone && after[tg] != m {
					others++
				}
			}
			floor := Floor(len(targets), len(members), DefaultLoadFactor)
			deficit := 0
			for _, m := range members {
				deficit += max(0, floor-loads(owners)[m])
			}
			assert.LessOrEqual(t, others, max(0, deficit-loads(owners)[gone]), "step %d: targets of staying members moved by a leave", step)
		case k == 2:
			for range 1 + r.IntN(5) {
				targets = append(targets, fmt.Sprintf("t%d", next))
				next++
			}
			after = AssignFrom(targets, members, owners, DefaultLoadFactor)
		default:
			for range 1 + r.IntN(5) {
				i := r.IntN(len(targets))
				targets = slices.Delete(targets, i, i+1)
			}
			after = AssignFrom(targets, members, owners, DefaultLoadFactor)
		}
		checkLoads(t, after, targets, members)
		require.Equal(t, after, AssignFrom(targets, members, after, DefaultLoadFactor), "step %d: an unchanged fleet moves", step)
		owners = after
	}
}

// checkLoads checks that a assigns every target to a member within
// [Floor, Capacity].
func checkLoads(t *testing.T, a map[string]string, targets, members []string) {
	t.Helper()
	floor, limit := Floor(len(targets), len(members), DefaultLoadFactor), Capacity(len(targets), len(members), DefaultLoadFactor)
	require.Len(t, a, len(targets))
	l := loads(a)
	for _, m := range members {
		require.True(t, l[m] >= floor && l[m] <= limit, "%s has %d targets, not in [%d, %d]", m, l[m], floor, limit)
	}
}
