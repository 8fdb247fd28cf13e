package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core/locktest"
)

const ms = int64(time.Millisecond)

func TestAnalyseUnionAndGrants(t *testing.T) {
	win := window{Start: 0, End: 10 * ms}
	r := analyse([]workerReport{
		{Holds: [][2]int64{{-1 * ms, 1 * ms}, {4 * ms, 5 * ms}}, Waits: []int64{ms, 2 * ms}},
		{Holds: [][2]int64{{2 * ms, 3 * ms}, {9 * ms, 12 * ms}}, Waits: []int64{3 * ms}, Cut: []int64{4 * ms}},
		{},
	}, win)
	// Inside the window: 0–1, 2–3, 4–5 and 9–10 ms.
	require.InDelta(t, 40.0, r.utilization, 1e-9)
	require.Zero(t, r.overlaps)
	require.Equal(t, []int{2, 2, 0}, r.grants)
	require.Equal(t, 1, r.cut)
	require.Len(t, r.waits, 4)
	// From the end of the hold before each grant that starts inside.
	require.Equal(t, locktest.Latencies{time.Millisecond, time.Millisecond, 4 * time.Millisecond}, r.handovers)
	require.Zero(t, r.fairness(), "a worker without a grant")
}

func TestAnalyseReportsOverlaps(t *testing.T) {
	win := window{Start: 0, End: 10 * ms}
	r := analyse([]workerReport{
		{Holds: [][2]int64{{1 * ms, 3 * ms}}},
		{Holds: [][2]int64{{2 * ms, 4 * ms}}},   // inside the first
		{Holds: [][2]int64{{3*ms + 1, 5 * ms}}}, // inside the second
		{Holds: [][2]int64{{5 * ms, 6 * ms}}},   // touching: no overlap
	}, win)
	require.Equal(t, 2, r.overlaps)
	require.InDelta(t, 50.0, r.utilization, 1e-9, "the union counts each instant once")
}

func TestFairness(t *testing.T) {
	require.InDelta(t, 0.5, roundResult{grants: []int{1, 3}}.fairness(), 1e-9)
	require.InDelta(t, 1.0, roundResult{grants: []int{4, 4, 4}}.fairness(), 1e-9)
}

func TestMedianRange(t *testing.T) {
	s, m := medianRange([]float64{81.3, 78.9, 81.1}, "%.1f%%")
	require.Equal(t, "81.1% (78.9–81.3)", s)
	require.InDelta(t, 81.1, m, 1e-9)
	s, _ = medianRange([]float64{2}, "%.2f")
	require.Equal(t, "2.00", s)
}
