package polllease

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomFleet is one fleet of the offline evaluation: members and targets
// with random names, and a member that joins.
type randomFleet struct {
	targets, members []string
	joiner           string
}

func randomName(r *rand.Rand, prefix string) string {
	return fmt.Sprintf("%s-%08x-%04x", prefix, r.Uint32(), r.Uint32()&0xffff)
}

// randomFleets returns n fleets of m members with 10 × m to 100 × m targets,
// drawn from seed.
func randomFleets(seed uint64, n, m int) []randomFleet {
	r := rand.New(rand.NewPCG(seed, uint64(m)))
	out := make([]randomFleet, n)
	for i := range out {
		f := randomFleet{members: make([]string, m), joiner: randomName(r, "host")}
		for j := range f.members {
			f.members[j] = randomName(r, "host")
		}
		f.targets = make([]string, 10*m+r.IntN(90*m+1))
		for j := range f.targets {
			f.targets[j] = randomName(r, "target")
		}
		out[i] = f
	}
	return out
}

// fleetFigures are the balance, join and leave figures of one fleet.
type fleetFigures struct {
	minMean, maxMean float64 // least and most loaded member over the mean, before and after the join
	join             float64 // targets moved by the join over T/(M+1)
	joinStrict       float64 // the same over the strict minimum (see strictMinimum)
	leave            float64 // targets moved when a member leaves after the join, over its load
}

// strictMinimum is the fewest moves that bring before, an assignment to m
// members, within [floor, limit] for m+1 members: the joiner needs floor
// targets, and each member above limit must shed its excess; one move can
// do both.
func strictMinimum(before map[string]string, targets, members int, lf float64) int {
	floor, limit := Floor(targets, members+1, lf), Capacity(targets, members+1, lf)
	excess := 0
	for _, n := range loads(before) {
		excess += max(0, n-limit)
	}
	return max(floor, excess)
}

// evaluate assigns f's targets to its members by Assign, then has f.joiner
// join and then the first member leave, each from the owners before it
// (AssignFrom), as instances that announce their holdings do.
func evaluate(f randomFleet) fleetFigures {
	lf := DefaultLoadFactor
	before := Assign(f.targets, f.members, lf)
	joined := append(slices.Clone(f.members), f.joiner)
	after := AssignFrom(f.targets, joined, before, lf)
	left := AssignFrom(f.targets, joined[1:], after, lf)
	lo, hi := math.Inf(1), 0.0
	for _, a := range []struct {
		assign  map[string]string
		members []string
	}{{before, f.members}, {after, joined}, {left, joined[1:]}} {
		mean := float64(len(f.targets)) / float64(len(a.members))
		l := loads(a.assign)
		for _, m := range a.members {
			lo, hi = min(lo, float64(l[m])/mean), max(hi, float64(l[m])/mean)
		}
	}
	mean := float64(len(f.targets)) / float64(len(joined))
	n := float64(moved(before, after))
	return fleetFigures{
		minMean:    lo,
		maxMean:    hi,
		join:       n / mean,
		joinStrict: n / float64(strictMinimum(before, len(f.targets), len(f.members), lf)),
		leave:      float64(moved(after, left)) / float64(loads(after)[joined[0]]),
	}
}

// quantiles returns the median, p95, p99 and worst of xs, sorted in place
// (worst is the smallest when low is set).
func quantiles(xs []float64, low bool) [4]float64 {
	slices.Sort(xs)
	if low {
		slices.Reverse(xs)
	}
	q := func(p float64) float64 { return xs[min(len(xs)-1, int(p*float64(len(xs))))] }
	return [4]float64{q(0.5), q(0.95), q(0.99), xs[len(xs)-1]}
}

// fleetsPerSize is how many random fleets of each size
// TestAssignRandomFleets evaluates; the figures in CHANGELOG.md are from
// -assign.fleets=2000.
var fleetsPerSize = flag.Int("assign.fleets", 25, "random fleets of each size evaluated by TestAssignRandomFleets")

// TestAssignRandomFleets evaluates the assignment over random fleets of 3,
// 5, 8, 12 and 20 members with 10 to 100 targets per member, a member
// joining each and then another leaving, as instances that announce their
// holdings assign (see evaluate): every member is within [Floor, Capacity],
// so within ±20 % of the mean, throughout; the join moves at most 1.3 ×
// the strict minimum (it moves exactly that), so at most 1.3 × T/(M+1);
// and the leave moves the leaver's targets and no other.
func TestAssignRandomFleets(t *testing.T) {
	for _, m := range []int{3, 5, 8, 12, 20} {
		var lo, hi, join, strict, leave []float64
		for i, f := range randomFleets(1, *fleetsPerSize, m) {
			checkBounds(t, f.targets, f.members)
			fig := evaluate(f)
			lo, hi = append(lo, fig.minMean), append(hi, fig.maxMean)
			join, strict, leave = append(join, fig.join), append(strict, fig.joinStrict), append(leave, fig.leave)
			if fig.minMean < 0.8-1e-9 || fig.maxMean > 1.2+1e-9 {
				t.Errorf("fleet %d (%d members, %d targets): loads %.3f to %.3f × the mean", i, m, len(f.targets), fig.minMean, fig.maxMean)
			}
			if fig.joinStrict > 1.3 || fig.join > 1.3 {
				t.Errorf("fleet %d (%d members, %d targets): a join moved %.2f × the strict minimum, %.2f × T/(M+1)", i, m, len(f.targets), fig.joinStrict, fig.join)
			}
			if fig.leave != 1 {
				t.Errorf("fleet %d (%d members, %d targets): a leave moved %.2f × the leaver's targets", i, m, len(f.targets), fig.leave)
			}
		}
		t.Logf("%2d members, %d fleets (median p95 p99 worst): min/mean %.3f  max/mean %.3f  join/(T/(M+1)) %.3f  join/strict minimum %.3f  leave/leaver's load %.3f",
			m, *fleetsPerSize, quantiles(lo, true), quantiles(hi, false), quantiles(join, false), quantiles(strict, false), quantiles(leave, false))
	}
}

// checkBounds checks that Assign gives every member between Floor and
// Capacity targets, within ±20 % of the mean when there are at least 10
// targets per member.
func checkBounds(t *testing.T, targets, members []string) {
	t.Helper()
	a := Assign(targets, members, DefaultLoadFactor)
	floor, limit := Floor(len(targets), len(members), DefaultLoadFactor), Capacity(len(targets), len(members), DefaultLoadFactor)
	mean := float64(len(targets)) / float64(len(members))
	l := loads(a)
	for _, m := range members {
		if l[m] < floor || l[m] > limit || (len(targets) >= 10*len(members) && math.Abs(float64(l[m])-mean) > 0.2*mean+1e-9) {
			t.Errorf("%d members, %d targets: %s has %d targets (floor %d, capacity %d, mean %.1f)", len(members), len(targets), m, l[m], floor, limit, mean)
		}
	}
	if len(a) != len(targets) {
		t.Errorf("%d of %d targets assigned", len(a), len(targets))
	}
}
