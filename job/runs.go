package job

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseRuns reads k, a choice of runs of repeat runs numbered from 1 (the
// dagrun command's --trace-runs, for Config.Traced): "" or "all" (every
// run), "first:N", "last:N", or a comma-separated list of run numbers and
// ranges A-B. It returns whether each run is chosen. The same syntax is
// meant for graph replays when they can be traced.
func ParseRuns(k string, repeat int) (func(run int) bool, error) {
	bad := func(format string, a ...any) error { return fmt.Errorf(format, a...) }
	switch {
	case k == "" || k == "all":
		return func(int) bool { return true }, nil
	case strings.HasPrefix(k, "first:") || strings.HasPrefix(k, "last:"):
		which, count, _ := strings.Cut(k, ":")
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 {
			return nil, bad("%s:N needs a count of runs, at least 1", which)
		}
		n = min(n, repeat)
		if which == "first" {
			return func(run int) bool { return run <= n }, nil
		}
		return func(run int) bool { return run > repeat-n }, nil
	}
	var ranges [][2]int
	for part := range strings.SplitSeq(k, ",") {
		from, to, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(from)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(to)
		}
		if err != nil {
			return nil, bad("use all, first:N, last:N, or run numbers and ranges such as 1,5-8")
		}
		if a < 1 || b < a || b > repeat {
			return nil, bad("runs are numbered 1 to %d (--repeat), and a range A-B has A <= B", repeat)
		}
		ranges = append(ranges, [2]int{a, b})
	}
	return func(run int) bool {
		for _, r := range ranges {
			if run >= r[0] && run <= r[1] {
				return true
			}
		}
		return false
	}, nil
}

// RunsText names the traced runs of repeat: "run 1", "3 runs" or "all 20
// runs".
func RunsText(traced []int, repeat int) string {
	switch {
	case len(traced) == 1:
		return fmt.Sprintf("run %d", traced[0])
	case len(traced) == repeat:
		return fmt.Sprintf("all %d runs", repeat)
	}
	return fmt.Sprintf("%d runs", len(traced))
}
