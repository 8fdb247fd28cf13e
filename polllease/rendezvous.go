package polllease

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
)

// DefaultLoadFactor is the bounded-load factor of Assign: every instance
// is assigned between (2 − DefaultLoadFactor) and DefaultLoadFactor times
// targets / instances targets, ±20 % of the mean, once there are at least 5
// targets per instance (see Capacity and Floor).
const DefaultLoadFactor = 1.2

// score is the rendezvous (highest random weight) score of member for
// target: a 64-bit hash of both, the same in every process and on every
// platform, so every instance that sees the same members and targets
// computes the same assignment.
func score(member, target string) uint64 {
	// FNV-1a over member, a separator that cannot occur in valid UTF-8,
	// and target, then the SplitMix64 finalizer so that close inputs give
	// unrelated scores.
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(member); i++ {
		h ^= uint64(member[i])
		h *= prime
	}
	h ^= 0xff
	h *= prime
	for i := 0; i < len(target); i++ {
		h ^= uint64(target[i])
		h *= prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// Preferred returns the member with the highest rendezvous score for target,
// ignoring load and the other targets, or "" when members is empty. Assign
// compares the same scores as ranks among the targets (see Assign), so it
// may depart from Preferred where two members score close for a target,
// besides where the load bounds make it.
func Preferred(target string, members []string) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		if s := score(m, target); best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

// Capacity returns the most targets Assign gives one member:
// ⌊loadFactor × targets / members⌋, but at least ⌈targets / members⌉ so
// that every target has room, and at least 1. loadFactor < 1 counts as 1.
func Capacity(targets, members int, loadFactor float64) int {
	if members <= 0 {
		return 0
	}
	loadFactor = max(loadFactor, 1)
	even := (targets + members - 1) / members
	return max(1, even, int(math.Floor(loadFactor*float64(targets)/float64(members)+1e-9)))
}

// Floor returns the fewest targets Assign gives one member:
// ⌈(2 − loadFactor) × targets / members⌉, but at most ⌊targets / members⌋,
// so that every member can have it, and at least 0.
func Floor(targets, members int, loadFactor float64) int {
	if members <= 0 {
		return 0
	}
	mean := float64(targets) / float64(members)
	f := int(math.Ceil((2-max(loadFactor, 1))*mean - 1e-9))
	return max(0, min(f, targets/members))
}

// Assign maps every target to a member by rendezvous hashing with the load
// bounded on both sides: every member gets between Floor and Capacity of
// (len(targets), len(members), loadFactor) targets, so with the default
// 1.2 every member is within ±20 % of the mean once there are at least 5
// targets per member. It is deterministic: the order of the slices does
// not matter, and duplicates count once. With no members it returns an
// empty map. It is AssignFrom with no current owners.
//
// Each member ranks the targets by its rendezvous score, and a pair
// (member, target) weighs by the target's rank in that member's order, so
// every member has exactly one target at each rank: member loads vary less
// than with raw scores, and fewer targets need moving to bound them. Pairs
// are granted greedily from the heaviest: a target goes to the member that
// ranks it highest among those with room, room being Capacity, and, once
// the targets left are only enough to bring the members below Floor up to
// it, only those members.
//
// The cost is O(T·M·log(T·M)) for T targets and M members.
func Assign(targets, members []string, loadFactor float64) map[string]string {
	return AssignFrom(targets, members, nil, loadFactor)
}

// AssignFrom is Assign starting from the current owners (target → member):
// each target stays with its owner while the owner is a member and within
// the bounds, so the assignment moves only what the bounds make move.
//   - A member over Capacity keeps the targets it scores highest and lets
//     the others go.
//   - When the targets let go and those without a live owner are too few
//     to bring every member up to Floor (a member joined), the most loaded
//     member gives up the target it scores lowest, one at a time, until
//     they are enough.
//   - Those targets are then granted as Assign grants all of them, the
//     members' loads counting what they kept.
//
// So a member joining takes the fewest targets that bound it, Floor or the
// excess over Capacity of the others, and a member leaving moves only its
// own targets; an assignment within the bounds is its own result. Every
// instance computes the same assignment from the same owners.
func AssignFrom(targets, members []string, owners map[string]string, loadFactor float64) map[string]string {
	members = dedup(members)
	targets = dedup(targets)
	out := make(map[string]string, len(targets))
	if len(members) == 0 || len(targets) == 0 {
		return out
	}
	limit := Capacity(len(targets), len(members), loadFactor)
	floor := Floor(len(targets), len(members), loadFactor)
	held, pool := keep(targets, members, owners, limit)
	load := make([]int, len(members))
	deficit := 0 // targets the members below floor still need
	for m, ts := range held {
		load[m] = len(ts)
		deficit += max(0, floor-len(ts))
	}
	if deficit > len(pool) {
		// Donors give up their lowest-scoring targets: order each
		// member's targets from its highest score down.
		for m, ts := range held {
			sortByScore(members[m], ts)
		}
	}
	for deficit > len(pool) {
		// Never endless: with every member at or below floor, the
		// pool already covers the deficit, since floor × members ≤
		// targets.
		t, m := donate(held, load)
		pool = append(pool, t)
		if load[m] < floor {
			deficit++
		}
	}
	for m, ts := range held {
		for _, t := range ts {
			out[t] = members[m]
		}
	}
	q := preferences(pool, members)
	heap.Init(&q)
	for q.Len() > 0 {
		c := q[0]
		m := c.ranked[c.next].member
		if l := load[m]; l < limit && (l < floor || q.Len() > deficit) {
			if l < floor {
				deficit--
			}
			load[m]++
			out[c.target] = members[m]
			heap.Pop(&q)
			continue
		}
		// The member is full, or the targets left are owed to members
		// below floor: the target falls to its next choice. There is
		// always one, since limit × members ≥ targets, and deficit > 0
		// means some member is below floor.
		c.next++
		heap.Fix(&q, 0)
	}
	return out
}

// keep returns the targets each member (by index) keeps of those owners
// gives it, at most limit, the ones it scores highest, and the pool of the
// others: targets without a live owner and those let go.
func keep(targets, members []string, owners map[string]string, limit int) (held [][]string, pool []string) {
	index := make(map[string]int, len(members))
	for i, m := range members {
		index[m] = i
	}
	held = make([][]string, len(members))
	for _, t := range targets {
		if m, ok := index[owners[t]]; ok {
			held[m] = append(held[m], t)
		} else {
			pool = append(pool, t)
		}
	}
	for m, ts := range held {
		if len(ts) > limit {
			sortByScore(members[m], ts)
			pool = append(pool, ts[limit:]...)
			held[m] = ts[:limit]
		}
	}
	return held, pool
}

// donate takes from the most loaded member (the first in order among
// equals) the target it scores lowest, the last of its targets, which are
// in sortByScore order, and returns the target and the member's index; load
// counts held.
func donate(held [][]string, load []int) (string, int) {
	top := 0
	for m := range load {
		if load[m] > load[top] {
			top = m
		}
	}
	ts := held[top]
	t := ts[len(ts)-1]
	held[top] = ts[:len(ts)-1]
	load[top]--
	return t, top
}

// sortByScore orders targets by member's score for them, highest first,
// then by name, scoring each once.
func sortByScore(member string, targets []string) {
	type scored struct {
		score  uint64
		target string
	}
	ss := make([]scored, len(targets))
	for i, t := range targets {
		ss[i] = scored{score(member, t), t}
	}
	slices.SortFunc(ss, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.target, b.target))
	})
	for i, s := range ss {
		targets[i] = s.target
	}
}

// preferences returns each target with the members in descending order of
// weight: the target's rank among the targets in the member's own score
// order, then the score (ties, which only ranks of different members can
// make), then the member's name.
func preferences(targets, members []string) candidates {
	type scored struct {
		score  uint64
		target int
	}
	byScore := make([]scored, len(targets))
	ranks := make([]ranked, len(targets)*len(members)) // target i's candidates at [i×M, (i+1)×M)
	for j, m := range members {
		for i, t := range targets {
			byScore[i] = scored{score(m, t), i}
		}
		slices.SortFunc(byScore, func(a, b scored) int {
			return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.target, b.target))
		})
		for r, s := range byScore {
			// The rank above the score's top 40 bits: one comparison
			// orders by rank, then score.
			ranks[s.target*len(members)+j] = ranked{member: j, weight: uint64(r)<<40 | s.score>>24}
		}
	}
	q := make(candidates, len(targets))
	for i, t := range targets {
		c := &candidate{target: t, ranked: ranks[i*len(members) : (i+1)*len(members)]}
		slices.SortFunc(c.ranked, func(a, b ranked) int { return b.compare(a) })
		q[i] = c
	}
	return q
}

func dedup(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// ranked is a member (its index in the sorted members) as a candidate for
// one target, with the pair's weight (see preferences).
type ranked struct {
	member int
	weight uint64
}

// compare orders candidates by weight, then by member index, the lower
// (the name first in order) weighing more.
func (r ranked) compare(o ranked) int {
	return cmp.Or(cmp.Compare(r.weight, o.weight), cmp.Compare(o.member, r.member))
}

type candidate struct {
	target string
	ranked []ranked
	next   int
}

func (c *candidate) current() ranked { return c.ranked[c.next] }

// candidates is a max-heap of targets by their current candidate, ties
// broken by target name so the result is deterministic.
type candidates []*candidate

func (q candidates) Len() int { return len(q) }
func (q candidates) Less(i, j int) bool {
	if c := q[i].current().compare(q[j].current()); c != 0 {
		return c > 0
	}
	return q[i].target < q[j].target
}
func (q candidates) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *candidates) Push(x any)   { *q = append(*q, x.(*candidate)) }
func (q *candidates) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// backup returns the member other than preferred that scores highest for
// target, or "" when there is none. It is the instance that takes a target
// over when the preferred owner has not taken it within a reconcile tick.
func backup(target, preferred string, members []string) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		if m == preferred {
			continue
		}
		if s := score(m, target); best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}
