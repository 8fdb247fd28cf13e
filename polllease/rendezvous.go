package polllease

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
)

// DefaultLoadFactor is the bounded-load factor of Assign: no instance is
// assigned more than ⌈DefaultLoadFactor × targets / instances⌉ targets.
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
// ignoring load, or "" when members is empty. Assign departs from it only to
// respect the load bound.
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
// ⌈loadFactor × targets / members⌉, at least 1. loadFactor < 1 counts as 1.
func Capacity(targets, members int, loadFactor float64) int {
	if members <= 0 {
		return 0
	}
	loadFactor = max(loadFactor, 1)
	return max(1, int(math.Ceil(loadFactor*float64(targets)/float64(members)-1e-9)))
}

// Assign maps every target to a member by rendezvous hashing with bounded
// load: each target goes to the member that scores highest for it among
// those with room, where no member takes more than
// Capacity(len(targets), len(members), loadFactor). It is deterministic:
// the order of the slices does not matter, and duplicates count once.
// With no members it returns an empty map.
//
// Pairs are granted greedily in descending score order, so a target leaves
// its first choice only when that member is full of targets that prefer it
// more strongly. A member joining therefore takes mostly the targets that
// rank it first (about targets/members of them), and a member leaving moves
// only its own targets, give or take the few that the load bound shifts.
//
// The load is bounded from below too: a member left with fewer than
// Floor(len(targets), len(members), loadFactor) targets then takes, one at a
// time, the target it scores highest for among those of members above that
// floor. With the default 1.2, every member is within ±20 % of the mean once
// there are at least 5 targets per member.
//
// The cost is O(T·M·log M + M·T·log T) for T targets and M members.
func Assign(targets, members []string, loadFactor float64) map[string]string {
	members = dedup(members)
	targets = dedup(targets)
	out := make(map[string]string, len(targets))
	if len(members) == 0 || len(targets) == 0 {
		return out
	}
	limit := Capacity(len(targets), len(members), loadFactor)
	load := make(map[string]int, len(members))

	// Each target's members in descending score order; the heap holds
	// each unassigned target at its best remaining candidate.
	q := make(candidates, 0, len(targets))
	for _, t := range targets {
		c := &candidate{target: t, ranked: make([]ranked, len(members))}
		for i, m := range members {
			c.ranked[i] = ranked{member: m, score: score(m, t)}
		}
		slices.SortFunc(c.ranked, func(a, b ranked) int {
			switch {
			case a.score > b.score:
				return -1
			case a.score < b.score:
				return 1
			case a.member < b.member:
				return -1
			case a.member > b.member:
				return 1
			}
			return 0
		})
		q = append(q, c)
	}
	heap.Init(&q)
	for q.Len() > 0 {
		c := q[0]
		r := c.ranked[c.next]
		if load[r.member] < limit {
			load[r.member]++
			out[c.target] = r.member
			heap.Pop(&q)
			continue
		}
		// The member is full: the target falls to its next choice. There
		// is always one, since limit × members ≥ targets.
		c.next++
		heap.Fix(&q, 0)
	}
	fill(out, targets, members, load, Floor(len(targets), len(members), loadFactor))
	return out
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

// fill raises every member of out below floor to floor, the least loaded
// first (ties by name): each takes, one at a time, the target it scores
// highest for among those held by members above floor. A donor never falls
// below floor, so a target passed over once stays out of reach and each
// member's ranking is walked once.
func fill(out map[string]string, targets, members []string, load map[string]int, floor int) {
	for {
		var u string
		for _, m := range members {
			if load[m] < floor && (u == "" || load[m] < load[u]) {
				u = m
			}
		}
		if u == "" {
			return
		}
		ranked := slices.Clone(targets)
		scores := make(map[string]uint64, len(ranked))
		for _, t := range ranked {
			scores[t] = score(u, t)
		}
		slices.SortFunc(ranked, func(a, b string) int {
			if scores[a] != scores[b] {
				return cmp.Compare(scores[b], scores[a])
			}
			return cmp.Compare(a, b)
		})
		for _, t := range ranked {
			if load[u] >= floor {
				break
			}
			if owner := out[t]; owner != u && load[owner] > floor {
				load[owner]--
				load[u]++
				out[t] = u
			}
		}
	}
}

func dedup(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

type ranked struct {
	member string
	score  uint64
}

type candidate struct {
	target string
	ranked []ranked
	next   int
}

func (c *candidate) current() ranked { return c.ranked[c.next] }

// candidates is a max-heap of targets by the score of their current
// candidate, ties broken by target name so the result is deterministic.
type candidates []*candidate

func (q candidates) Len() int { return len(q) }
func (q candidates) Less(i, j int) bool {
	a, b := q[i].current(), q[j].current()
	if a.score != b.score {
		return a.score > b.score
	}
	if a.member != b.member {
		return a.member < b.member
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
