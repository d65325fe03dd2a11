package spec

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/human"
	names "github.com/dagrun/dagrun/internal/suggest"
)

// Position is a place in a spec file. Line and Col count from 1.
type Position struct {
	File string
	Line int
	Col  int
}

// String formats p as file:line:col, the form editors and compilers use.
func (p Position) String() string {
	return fmt.Sprintf("%s:%d:%d", human.Quote(p.File), p.Line, p.Col)
}

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

// Compare orders errors by position, as a sorted ErrorList is.
func (e *Error) Compare(f *Error) int { return comparePositions(e.Pos, f.Pos) }

// ErrorList is every problem of a spec, as go/scanner.ErrorList holds a
// file's: Parse and Load return one (as an error, through Err) ordered by
// position. It is dag's list of errors, of spec's *Error.
type ErrorList = dag.ErrorListOf[*Error]

// Errors lists the *Error values inside err, which Parse and Load return
// (an ErrorList, possibly wrapped or joined with others).
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case *Error:
			out = append(out, e)
			return
		case ErrorList:
			out = append(out, e...)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var l ErrorList
		if errors.As(err, &l) {
			out = append(out, l...)
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

// suggestCells bounds the did-you-mean suggestions: all those of one
// spec together compute at most that many cells of edit distance (and
// names longer than suggest.MaxLen are not compared).
const suggestCells = 1 << 24

// suggest returns a hint naming the candidate closest to got, or listing
// the candidates when none is close. Its work is bounded: see
// suggestCells.
func (r *reader) suggest(got string, candidates []string) string {
	if len(r.errs) >= MaxErrors {
		return "" // the error it is for will not be listed
	}
	if best, ok := nearest(got, candidates, &r.suggestBudget); ok {
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

// Nearest returns the candidate nearest got, when one is near enough to
// be what was meant: the "did you mean" of the loader's messages, for
// callers that check names of a spec's things themselves (the CLI's
// --fail-op). Names are compared case-folded, in edit distance with a
// transposition of neighbours counting one; the work is bounded as for
// one spec's messages.
func Nearest(got string, candidates []string) (string, bool) {
	budget := suggestCells
	return nearest(got, candidates, &budget)
}

// nearest is Nearest, charging its work to budget.
func nearest(got string, candidates []string, budget *int) (string, bool) {
	return names.Nearest(got, candidates, budget)
}

// editDistance is the edit distance suggestions use.
func editDistance(a, b string) int { return names.EditDistance(a, b) }

// suggest is reader.suggest with a budget of its own.
func suggest(got string, candidates []string) string {
	r := reader{suggestBudget: suggestCells}
	return r.suggest(got, candidates)
}
