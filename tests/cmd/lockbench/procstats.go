package main

import (
	"cmp"
	"fmt"
	"math"
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
	handovers   locktest.Latencies // per grant in the window: from the end of the hold before it, sorted
	cut         int                // of which still waiting drainFor after it: a lower bound
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
	return fmt.Sprintf("utilization=%.1f%% p50-wait=%v p99-wait=%v p50-handover=%v cut=%d grants=%d..%d fairness=%.2f overlaps=%d",
		r.utilization, r.waits.Percentile(50).Round(time.Microsecond), r.waits.Percentile(99).Round(time.Microsecond),
		r.handovers.Percentile(50).Round(time.Microsecond), r.cut, slices.Min(r.grants), slices.Max(r.grants), r.fairness(), r.overlaps)
}

// analyse merges the workers' hold intervals: two that overlap break
// mutual exclusion; their union inside the window, over its length, is
// the utilization. The time from the end of a hold to the start of the
// next one, for each grant that starts in the window, is a handover: under
// contention, from a release to the next grant.
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
		for _, w := range append(rep.Waits, rep.Cut...) {
			r.waits = append(r.waits, time.Duration(w))
		}
		r.cut += len(rep.Cut)
	}
	slices.Sort(r.waits)
	slices.SortFunc(holds, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	// covered: the union counted so far ends there.
	held, lastEnd, covered := int64(0), int64(math.MinInt64), win.Start
	for _, h := range holds {
		if h[0] < lastEnd {
			r.overlaps++
		} else if lastEnd != math.MinInt64 && h[0] >= win.Start && h[0] < win.End {
			r.handovers = append(r.handovers, time.Duration(h[0]-lastEnd))
		}
		lastEnd = max(lastEnd, h[1])
		s, e := max(h[0], covered), min(h[1], win.End)
		if e > s {
			held += e - s
			covered = e
		}
	}
	r.utilization = 100 * float64(held) / float64(win.End-win.Start)
	slices.Sort(r.handovers)
	return r
}

// floorOf names each case's raw floor: the table divides a case's median
// utilization by its floor's, measured in the same rounds.
var floorOf = map[string]string{
	"file: filelock":  "file: flock + 1ms sleep-poll",
	"redislock":       "raw SET NX PX + CAD script",
	"bsm/redislock":   "raw SET NX PX + CAD script",
	"redsync":         "raw SET NX PX + CAD script",
	"redlock N=3":     "raw quorum N=3",
	"redsync N=3":     "raw quorum N=3",
	"redlock N=5":     "raw quorum N=5",
	"redsync N=5":     "raw quorum N=5",
	"pglock":          "pg-raw-advisory",
	"pglock-table":    "pg-raw-advisory",
	"natslock":        "nats-kv-raw",
	"mysqllock":       "mysql-raw-get-lock",
	"mysqllock-table": "mysql-raw-get-lock",
}

// procsRow is one case's line of the multi-process table.
type procsRow struct {
	util, fair string
	medUtil    float64
	waits      locktest.Latencies
	handovers  locktest.Latencies
	gMin, gMax int
	cut        int
	overlaps   int
}

func summarise(rs []roundResult) procsRow {
	var utils, fair []float64
	var row procsRow
	var grants []int
	for _, r := range rs {
		utils = append(utils, r.utilization)
		fair = append(fair, r.fairness())
		row.waits = append(row.waits, r.waits...)
		row.handovers = append(row.handovers, r.handovers...)
		grants = append(grants, r.grants...)
		row.overlaps += r.overlaps
		row.cut += r.cut
	}
	sortDur(row.waits)
	sortDur(row.handovers)
	row.util, row.medUtil = medianRange(utils, "%.1f%%")
	row.fair, _ = medianRange(fair, "%.2f")
	row.gMin, row.gMax = slices.Min(grants), slices.Max(grants)
	return row
}

// printProcsTable prints, per case, the median utilization of the rounds
// with their range and its ratio to the case's floor, the p50 and p99 of
// every wait of every round (a wait cut after the window counts as its
// length then, a lower bound), the p50 of every handover, the range of
// grants per worker, the median fewest/mean grants with its range, the cut
// waits and the overlaps.
func printProcsTable(cases []benchCase, rs [][]roundResult, cfg procsConfig) {
	fmt.Printf("%d worker processes, hold %v, think %v, %v per case and round, %d rounds\n",
		cfg.workers, holdFor, thinkFor, cfg.duration, cfg.rounds)
	rows := make([]procsRow, len(cases))
	med := map[string]float64{}
	for i, c := range cases {
		rows[i] = summarise(rs[i])
		med[c.Name] = rows[i].medUtil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "case\tutilization (range)\t× floor\tp50 wait\tp99 wait\thandover p50\tgrants per worker\tfewest/mean (range)\twaits cut\toverlaps\t")
	overlaps := 0
	for i, c := range cases {
		r := rows[i]
		overlaps += r.overlaps
		ratio := "-"
		if f, ok := med[floorOf[c.Name]]; ok && f > 0 {
			ratio = fmt.Sprintf("%.2f", r.medUtil/f)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%v\t%v\t%d–%d\t%s\t%d\t%d\t\n", c.Name, r.util, ratio,
			short(r.waits.Percentile(50)), short(r.waits.Percentile(99)), short(r.handovers.Percentile(50)),
			r.gMin, r.gMax, r.fair, r.cut, r.overlaps)
	}
	_ = w.Flush()
	if overlaps > 0 {
		fmt.Println(strings.Repeat("!", 20), "mutual exclusion violated")
		os.Exit(1)
	}
}

// medianRange formats the median of vs and, with more than one, their
// range: "81.1% (78.9–81.3)"; it also returns the median.
func medianRange(vs []float64, format string) (string, float64) {
	s := slices.Sorted(slices.Values(vs))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	out := fmt.Sprintf(format, med)
	if len(s) > 1 {
		out += fmt.Sprintf(" (%s–%s)", strings.TrimSuffix(fmt.Sprintf(format, s[0]), "%"), strings.TrimSuffix(fmt.Sprintf(format, s[len(s)-1]), "%"))
	}
	return out, med
}

// short formats d to three significant digits: "131ms", "6.39ms", "1.47s".
func short(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.3gs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.3gms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
}
