package spec

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Position is a place in a spec file. Line and Col count from 1.
type Position struct {
	File string
	Line int
	Col  int
}

// String formats p as file:line:col, the form editors and compilers use.
func (p Position) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

func comparePositions(a, b Position) int {
	return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
}

// Error is one problem with a spec: where it is, what is wrong and, where
// one is known, what would be right.
type Error struct {
	Pos  Position
	Msg  string
	Hint string
}

func (e *Error) Error() string {
	if e.Hint == "" {
		return fmt.Sprintf("%s: %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("%s: %s (%s)", e.Pos, e.Msg, e.Hint)
}

// Errors lists the *Error values inside err, which Parse and Load join.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if e, ok := err.(*Error); ok {
			out = append(out, e)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var e *Error
		if errors.As(err, &e) {
			out = append(out, e)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// joinErrors sorts errs by position and joins them; nil when there are none.
func joinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	sortErrors(errs)
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errors.Join(list...)
}

func sortErrors(errs []*Error) {
	slices.SortStableFunc(errs, func(a, b *Error) int { return comparePositions(a.Pos, b.Pos) })
}

// suggest returns a hint naming the candidate closest to got, or listing
// the candidates when none is close.
func suggest(got string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(got), strings.ToLower(c))
		if d <= max(1, len(c)/3) && d < len(c) && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	if len(candidates) == 0 {
		return ""
	}
	if len(candidates) > 12 {
		return fmt.Sprintf("use one of %s, ...", strings.Join(candidates[:12], ", "))
	}
	return "use one of " + strings.Join(candidates, ", ")
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and transpositions of
// neighbours each count one.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
