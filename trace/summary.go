package trace

import (
	"bufio"
	"cmp"
	"fmt"
	"github.com/dagrun/dagrun/internal/human"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dagrun/dagrun/dag"
)

// Summary is what WriteSummary prints, as numbers.
type Summary struct {
	// Makespan runs from the start of the first slice to the end of the last.
	Makespan time.Duration
	Streams  []StreamSummary // in lane order
	// CopyBusy is the time at least one copy runs; KernelBusy the time at
	// least one kernel (launch or fill) runs; Overlap the time both do.
	CopyBusy, KernelBusy, Overlap time.Duration
	// OverlapShare is Overlap over Makespan; CopyHidden is Overlap over
	// CopyBusy, the share of copy time hidden behind kernels.
	OverlapShare, CopyHidden float64
	// CommBusy is the time at least one collective runs; CommOverlap the
	// time a kernel runs beside one (a split all_reduce's blocks beside
	// the next block's GEMMs); CommHidden is CommOverlap over CommBusy.
	CommBusy, CommOverlap time.Duration
	CommHidden            float64
	// CriticalPath is the trace's critical path (Figures.CriticalPath);
	// Ratio is Makespan over it (1 is the best any schedule can do).
	CriticalPath time.Duration
	Ratio        float64
	Waits        []WaitSummary // longest idle first
	Copies       []CopySummary // by path, in path order
	// Runs are the runs of a trace of several (FromRuns), by number; nil
	// for one run. Ratio is then the median run's makespan over
	// CriticalPath.
	Runs []RunSummary
	// Loops are the loops' iterations (Trace.Loops), one per loop: over
	// several runs, the fewest and most of a run.
	Loops []LoopSummary
}

// LoopSummary is how many iterations a loop ran: Min and Max over the
// runs that ran its body (equal for one run).
type LoopSummary struct {
	Name     string
	Runs     int
	Min, Max int
	Timed    int // the most iterations of a run timed op by op, where a run had only a sample timed (LoopRun.Timed)
}

// RunSummary is one run's place in a trace of several.
type RunSummary struct {
	Run      int
	Start    time.Duration // of its first slice
	Makespan time.Duration // from its first slice's start to its last one's end
}

// CopySummary is the copies of one path (Slice.Path): how many, their
// bytes and time, and the bandwidth they achieved together.
type CopySummary struct {
	Path  string
	Count int
	Bytes int64
	Time  time.Duration // the sum of their durations
	GBps  float64       // Bytes over Time
}

// StreamSummary is one lane's share of the work.
type StreamSummary struct {
	Lane  int
	Ops   int
	Busy  time.Duration // time at least one of its slices runs
	Share float64       // Busy over the trace's makespan
}

// WaitSummary is how long a stream sat idle before an op it ran after
// waiting for events: from the end of the stream's previous slice (or the
// start of the trace, if there is none) to the start of the op. Lag is the
// time from the end of the latest op it waited for to its own start (the
// cost of the event round trip, or negative if the op started first).
type WaitSummary struct {
	Slice int   // the op after the waits: index into Trace.Slices
	For   []int // the ops it waited for: indices into Trace.Slices
	Idle  time.Duration
	Lag   time.Duration
}

// Summarize computes the figures of t that WriteSummary prints.
func (t *Trace) Summarize() Summary {
	s := Summary{Makespan: t.Makespan(), CriticalPath: t.Figures.CriticalPath}
	byLane := make([][]interval, len(t.Lanes))
	var copies, kernels, comms []interval
	for _, sl := range t.Slices {
		iv := interval{sl.Start, sl.End()}
		if sl.Lane >= 0 && sl.Lane < len(byLane) {
			byLane[sl.Lane] = append(byLane[sl.Lane], iv)
		}
		switch kindStyles[sl.Kind].overlap {
		case copyWork:
			copies = append(copies, iv)
		case kernelWork:
			kernels = append(kernels, iv)
		case commWork:
			comms = append(comms, iv)
		}
	}
	tailOps, tailBusy := make([]int, len(byLane)), make([]time.Duration, len(byLane))
	for _, lt := range t.Tails { // a lane runs one op at a time: tails add up
		if lt.Lane >= 0 && lt.Lane < len(byLane) {
			tailOps[lt.Lane] += lt.Slices
			tailBusy[lt.Lane] += lt.Busy
		}
	}
	for lane, ivs := range byLane {
		ss := StreamSummary{Lane: lane, Ops: len(ivs) + tailOps[lane], Busy: length(union(ivs)) + tailBusy[lane]}
		ss.Share = share(ss.Busy, s.Makespan)
		s.Streams = append(s.Streams, ss)
	}
	cu, ku := union(copies), union(kernels)
	s.CopyBusy, s.KernelBusy = length(cu), length(ku)
	s.Overlap = length(intersect(cu, ku))
	s.OverlapShare = share(s.Overlap, s.Makespan)
	s.CopyHidden = share(s.Overlap, s.CopyBusy)
	mu := union(comms)
	s.CommBusy = length(mu)
	s.CommOverlap = length(intersect(mu, ku))
	s.CommHidden = share(s.CommOverlap, s.CommBusy)
	s.Ratio = share(s.Makespan, s.CriticalPath)
	s.Waits = t.waits()
	s.Copies = t.copies()
	s.Runs = t.runs()
	s.Loops = t.loops()
	if len(s.Runs) > 1 {
		s.Ratio = share(medianMakespan(s.Runs), s.CriticalPath)
	}
	return s
}

// copies sums up the copies by path.
func (t *Trace) copies() []CopySummary {
	byPath := map[string]*CopySummary{}
	for _, sl := range t.Slices {
		if sl.Path == "" {
			continue
		}
		c := byPath[sl.Path]
		if c == nil {
			c = &CopySummary{Path: sl.Path}
			byPath[sl.Path] = c
		}
		c.Count++
		c.Bytes += sl.Bytes
		c.Time += sl.Dur
	}
	out := make([]CopySummary, 0, len(byPath))
	for _, c := range byPath {
		if c.Time > 0 {
			c.GBps = float64(c.Bytes) / c.Time.Seconds() / 1e9
		}
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b CopySummary) int { return cmp.Compare(a.Path, b.Path) })
	return out
}

// runs sums up each run of a trace of several; nil for one.
func (t *Trace) runs() []RunSummary {
	at := map[int]int{}
	var out []RunSummary
	for _, sl := range t.Slices {
		k, ok := at[sl.Run]
		if !ok {
			k = len(out)
			at[sl.Run] = k
			out = append(out, RunSummary{Run: sl.Run, Start: sl.Start, Makespan: sl.Dur})
		}
		r := &out[k]
		end := max(r.Start+r.Makespan, sl.End())
		r.Start = min(r.Start, sl.Start)
		r.Makespan = end - r.Start
	}
	if len(out) < 2 {
		return nil
	}
	slices.SortFunc(out, func(a, b RunSummary) int { return cmp.Compare(a.Run, b.Run) })
	return out
}

func medianMakespan(runs []RunSummary) time.Duration {
	ms := make([]time.Duration, len(runs))
	for i, r := range runs {
		ms[i] = r.Makespan
	}
	slices.Sort(ms)
	return ms[len(ms)/2]
}

// waits lists, per op after a wait, the idle time before it, longest first.
func (t *Trace) waits() []WaitSummary {
	// prevEnd[i] is the end of the slice before slice i on its lane.
	prevEnd := make([]time.Duration, len(t.Slices))
	for i := range t.Slices {
		if i > 0 && t.Slices[i-1].Lane == t.Slices[i].Lane {
			prevEnd[i] = max(prevEnd[i-1], t.Slices[i-1].End())
		}
	}
	var out []WaitSummary
	at := map[int]int{} // slice -> index in out
	for _, f := range t.Flows {
		if f.To < 0 || f.To >= len(t.Slices) || f.From < 0 || f.From >= len(t.Slices) {
			continue
		}
		k, ok := at[f.To]
		if !ok {
			k = len(out)
			at[f.To] = k
			to := t.Slices[f.To]
			out = append(out, WaitSummary{Slice: f.To, Idle: max(to.Start-prevEnd[f.To], 0), Lag: to.Start - t.Slices[f.From].End()})
		}
		w := &out[k]
		w.For = append(w.For, f.From)
		w.Lag = min(w.Lag, t.Slices[f.To].Start-t.Slices[f.From].End())
	}
	slices.SortStableFunc(out, func(a, b WaitSummary) int {
		return cmp.Or(cmp.Compare(b.Idle, a.Idle), cmp.Compare(a.Slice, b.Slice))
	})
	return out
}

// longestWaits is how many waits WriteSummary lists.
const longestWaits = 10

// WriteSummary writes the summary of t as aligned text: per stream its ops,
// busy time and share of the makespan; copy/compute overlap; the makespan
// against the critical path; and the longest waits.
func (t *Trace) WriteSummary(w io.Writer) error { return t.WriteSummaryWith(w, SummaryOptions{}) }

// SummaryOptions say what WriteSummaryWith leaves out.
type SummaryOptions struct {
	// Brief leaves out the longest waits.
	Brief bool
	// NoEstimate leaves out the plan's estimate, where its cost model does
	// not describe the backend that ran (the default model, of a GPU, on
	// the CPU backend).
	NoEstimate bool
}

// WriteSummaryWith writes the summary of t as WriteSummary does, less
// what o leaves out.
func (t *Trace) WriteSummaryWith(w io.Writer, o SummaryOptions) error {
	s := t.Summarize()
	bw := bufio.NewWriter(w)
	what := "measured"
	if t.Figures.Estimated {
		what = "estimated"
	}
	fmt.Fprintf(bw, "makespan %s (%s), %s on %s\n", fmtDur(s.Makespan), what, human.Count(len(t.Slices), "op", "ops"), human.Count(len(t.Lanes), "stream", "streams"))
	if n := len(s.Runs); n > 1 {
		fmt.Fprintf(bw, "runs %d traced (%d to %d); makespan per run: min %s, median %s, max %s\n", n, s.Runs[0].Run, s.Runs[n-1].Run,
			fmtDur(slices.MinFunc(s.Runs, byMakespan).Makespan), fmtDur(medianMakespan(s.Runs)), fmtDur(slices.MaxFunc(s.Runs, byMakespan).Makespan))
	}
	bw.WriteByte('\n')

	rows := [][]string{{"stream", "priority", "kind", "ops", "busy", "share"}}
	for _, ss := range s.Streams {
		l := t.Lanes[ss.Lane]
		rows = append(rows, []string{l.Name, l.Priority.String(), l.Kind.String(), fmt.Sprint(ss.Ops), fmtDur(ss.Busy), pct(ss.Share)})
	}
	writeTable(bw, rows, []bool{false, false, false, true, true, true})

	if len(s.Copies) > 0 {
		bw.WriteByte('\n')
		rows := [][]string{{"copies", "count", "bytes", "time", "GB/s"}}
		for _, c := range s.Copies {
			rows = append(rows, []string{c.Path, fmt.Sprint(c.Count), dag.FormatBytes(c.Bytes), fmtDur(c.Time), fmt.Sprintf("%.1f", c.GBps)})
		}
		writeTable(bw, rows, []bool{false, true, true, true, true})
	}
	fmt.Fprintf(bw, "\ncopy/compute overlap  %s (%s of makespan; %s of copy time %s hidden behind kernels, kernel time %s)\n",
		fmtDur(s.Overlap), pct(s.OverlapShare), pct(s.CopyHidden), fmtDur(s.CopyBusy), fmtDur(s.KernelBusy))
	if s.CommBusy > 0 {
		fmt.Fprintf(bw, "collective/compute    %s (%s of collective time %s beside kernels)\n",
			fmtDur(s.CommOverlap), pct(s.CommHidden), fmtDur(s.CommBusy))
	}
	if len(s.Runs) > 1 {
		fmt.Fprintf(bw, "critical path         %s (median run makespan / critical path = %.2f)\n", fmtDur(s.CriticalPath), s.Ratio)
	} else {
		fmt.Fprintf(bw, "critical path         %s (makespan / critical path = %.2f)\n", fmtDur(s.CriticalPath), s.Ratio)
	}
	if len(s.Loops) > 0 {
		bw.WriteByte('\n')
		rows := [][]string{{"loop", "runs", "iterations"}}
		for _, l := range s.Loops {
			its := fmt.Sprint(l.Min)
			if l.Max != l.Min {
				its = fmt.Sprintf("%d-%d", l.Min, l.Max)
			}
			if l.Timed > 0 {
				its += fmt.Sprintf(" (first %d timed op by op)", l.Timed)
			}
			rows = append(rows, []string{l.Name, fmt.Sprint(l.Runs), its})
		}
		writeTable(bw, rows, []bool{false, true, true})
	}
	f := t.Figures
	if !o.NoEstimate && (f.EstMakespan > 0 || f.EstCriticalPath > 0) {
		fmt.Fprintf(bw, "plan estimate         makespan %s, critical path %s (cost model)\n", fmtDur(f.EstMakespan), fmtDur(f.EstCriticalPath))
	}
	fmt.Fprintf(bw, "plan                  %s, %s, %s, %s\n", human.Count(f.Ops, "op", "ops"), human.Count(f.Streams, "stream", "streams"),
		human.Count(f.CrossEdges, "cross-stream edge", "cross-stream edges"), human.Count(f.Waits, "wait", "waits"))
	for _, u := range f.Unfused {
		fmt.Fprintf(bw, "unfused               %s\n", u)
	}

	if len(s.Waits) > 0 && !o.Brief {
		n := min(len(s.Waits), longestWaits)
		fmt.Fprintf(bw, "\nlongest waits (%d of %d; idle: the stream's gap before the op, lag: from the end of the op waited for to the op's start)\n", n, len(s.Waits))
		rows := [][]string{{"stream", "op", "waited for", "idle", "lag"}}
		for _, ws := range s.Waits[:n] {
			sl := t.Slices[ws.Slice]
			var fors []string
			for _, i := range ws.For {
				fors = append(fors, fmt.Sprintf("%s on %s", t.Slices[i].Name, t.Lanes[t.Slices[i].Lane].Name))
			}
			rows = append(rows, []string{t.Lanes[sl.Lane].Name, sl.Name, strings.Join(fors, ", "), fmtDur(ws.Idle), fmtDur(ws.Lag)})
		}
		writeTable(bw, rows, []bool{false, false, false, true, true})
	}
	return bw.Flush()
}

// briefReplays is how many whole replays WriteReplays lists unless asked
// for all.
const briefReplays = 5

// WriteReplays writes the replays traced as whole graphs
// (Figures.Replays), saying how they were timed: the first few, or with
// all every one. It writes nothing for a trace without them.
func (t *Trace) WriteReplays(w io.Writer, all bool) {
	whole := t.Figures.Replays
	if len(whole) == 0 {
		return
	}
	fmt.Fprintf(w, "replays traced as whole graphs (%s):\n", t.Figures.ReplayTiming)
	shown := whole
	if !all && len(shown) > briefReplays {
		shown = shown[:briefReplays]
	}
	for _, r := range shown {
		fmt.Fprintf(w, "  replay %d: %s\n", r.Run, fmtDur(r.Dur))
	}
	if n := len(whole) - len(shown); n > 0 {
		fmt.Fprintf(w, "  and %d more (-v lists every one; the trace holds them)\n", n)
	}
}

// writeTable writes rows as columns two spaces apart, numbers aligned right.
func writeTable(w *bufio.Writer, rows [][]string, right []bool) {
	width := make([]int, len(right))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				line.WriteString("  ")
			}
			if right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
		}
		w.WriteString(strings.TrimRight(line.String(), " "))
		w.WriteByte('\n')
	}
}

type interval struct{ from, to time.Duration }

// union merges intervals into sorted disjoint ones; it sorts ivs.
func union(ivs []interval) []interval {
	slices.SortFunc(ivs, func(a, b interval) int { return cmp.Compare(a.from, b.from) })
	var out []interval
	for _, iv := range ivs {
		if iv.to <= iv.from {
			continue
		}
		if n := len(out); n > 0 && iv.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, iv.to)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// intersect intersects two sorted lists of disjoint intervals.
func intersect(a, b []interval) []interval {
	var out []interval
	for i, j := 0, 0; i < len(a) && j < len(b); {
		from, to := max(a[i].from, b[j].from), min(a[i].to, b[j].to)
		if from < to {
			out = append(out, interval{from, to})
		}
		if a[i].to < b[j].to {
			i++
		} else {
			j++
		}
	}
	return out
}

func length(ivs []interval) time.Duration {
	var n time.Duration
	for _, iv := range ivs {
		n += iv.to - iv.from
	}
	return n
}

func share(part, whole time.Duration) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// fmtDur is d as dagrun writes durations everywhere.
func fmtDur(d time.Duration) string { return human.Duration(d) }

func byMakespan(a, b RunSummary) int { return cmp.Compare(a.Makespan, b.Makespan) }
