package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/distlock/distlock/core/locktest"
)

// roundResult is one case's round in the multi-process mode.
type roundResult struct {
	utilization float64            // % of the window during which some worker held the lock
	waits       locktest.Latencies // every Acquire started in the window, sorted
	grants      []int              // per worker: grants that began in the window
	overlaps    int                // holds that began before an earlier one ended: must be 0
}

// fairness is the fewest grants any worker got divided by the mean.
func (r roundResult) fairness() float64 {
	total := 0
	for _, g := range r.grants {
		total += g
	}
	if total == 0 {
		return 0
	}
	return float64(slices.Min(r.grants)) * float64(len(r.grants)) / float64(total)
}

func (r roundResult) String() string {
	return fmt.Sprintf("utilization=%.1f%% p50-wait=%v p99-wait=%v grants=%d..%d fairness=%.2f overlaps=%d",
		r.utilization, r.waits.Percentile(50).Round(time.Microsecond), r.waits.Percentile(99).Round(time.Microsecond),
		slices.Min(r.grants), slices.Max(r.grants), r.fairness(), r.overlaps)
}

// analyse merges the workers' hold intervals: two that overlap break
// mutual exclusion; their union inside the window, over its length, is
// the utilization.
func analyse(reports []workerReport, win window) roundResult {
	var r roundResult
	var holds [][2]int64
	for _, rep := range reports {
		n := 0
		for _, h := range rep.Holds {
			holds = append(holds, h)
			if h[0] < win.End {
				n++
			}
		}
		r.grants = append(r.grants, n)
		for _, w := range rep.Waits {
			r.waits = append(r.waits, time.Duration(w))
		}
	}
	slices.Sort(r.waits)
	slices.SortFunc(holds, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	var held, lastEnd, covered int64 // covered: the union counted so far ends here
	for _, h := range holds {
		if h[0] < lastEnd {
			r.overlaps++
		}
		lastEnd = max(lastEnd, h[1])
		s, e := max(h[0], win.Start, covered), min(h[1], win.End)
		if e > s {
			held += e - s
			covered = e
		}
	}
	r.utilization = 100 * float64(held) / float64(win.End-win.Start)
	return r
}

// printProcsTable prints, per case, the median utilization of the rounds
// with their range, the p99 of every wait of every round, the range of
// grants per worker, the median fairness with its range, and overlaps.
func printProcsTable(cases []benchCase, rs [][]roundResult, cfg procsConfig) {
	fmt.Printf("%d worker processes, hold %v, think %v, %v per case and round, %d rounds\n",
		cfg.workers, holdFor, thinkFor, cfg.duration, cfg.rounds)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "case\tutilization (range)\tp50 wait\tp99 wait\tgrants per worker\tfewest/mean (range)\toverlaps\t")
	overlaps := 0
	for i, c := range cases {
		var utils, fair []float64
		var waits locktest.Latencies
		var grants []int
		for _, r := range rs[i] {
			utils = append(utils, r.utilization)
			fair = append(fair, r.fairness())
			waits = append(waits, r.waits...)
			grants = append(grants, r.grants...)
			overlaps += r.overlaps
		}
		sortDur(waits)
		fmt.Fprintf(w, "%s\t%s\t%v\t%v\t%d–%d\t%s\t%d\t\n", c.Name,
			medianRange(utils, "%.1f%%"), waits.Percentile(50).Round(10*time.Microsecond),
			waits.Percentile(99).Round(10*time.Microsecond), slices.Min(grants), slices.Max(grants),
			medianRange(fair, "%.2f"), sumOverlaps(rs[i]))
	}
	_ = w.Flush()
	if overlaps > 0 {
		fmt.Println(strings.Repeat("!", 20), "mutual exclusion violated")
		os.Exit(1)
	}
}

func sumOverlaps(rs []roundResult) int {
	n := 0
	for _, r := range rs {
		n += r.overlaps
	}
	return n
}

// medianRange formats the median of vs and, with more than one, their
// range: "81.1% (78.9–81.3)".
func medianRange(vs []float64, format string) string {
	s := slices.Sorted(slices.Values(vs))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	out := fmt.Sprintf(format, med)
	if len(s) > 1 {
		out += fmt.Sprintf(" (%s–%s)", strings.TrimSuffix(fmt.Sprintf(format, s[0]), "%"), strings.TrimSuffix(fmt.Sprintf(format, s[len(s)-1]), "%"))
	}
	return out
}
