package dag

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Error is a problem with one buffer, kernel or operation of a graph. It
// names the thing (so that a spec loader can point at where it was written),
// says what is wrong and, where one is known, how to fix it.
type Error struct {
	Op     string // the operation's name, if the problem is with an operation
	Buffer string // the buffer's name, if the problem is with a buffer
	Kernel string // the kernel's name, if the problem is with a kernel
	Field  string // the part of the thing that is wrong, for example "after" or "args.alpha"
	Msg    string
	Hint   string
	// Err is the cause, when there is one a caller may test for with
	// errors.As (for example an *ArgTypeError).
	Err error

	decl int32 // 1 + the declaration index of the thing it names; 0 when unknown
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Op != "":
		fmt.Fprintf(&b, "op %q: ", e.Op)
	case e.Buffer != "":
		fmt.Fprintf(&b, "buffer %q: ", e.Buffer)
	case e.Kernel != "":
		fmt.Fprintf(&b, "kernel %q: ", e.Kernel)
	}
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString(" (")
		b.WriteString(e.Hint)
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Compare orders errors as a sorted ErrorList does: by the declaration of
// the thing they name, errors whose declaration is unknown last.
func (e *Error) Compare(f *Error) int {
	switch a, b := e.decl, f.decl; {
	case a == b:
		return 0
	case a == 0:
		return 1
	case b == 0:
		return -1
	case a < b:
		return -1
	}
	return 1
}

// ErrorList is every problem Build found, in declaration order of the
// buffers and operations they name (as go/scanner.ErrorList is in source
// order). The zero value is an empty list.
type ErrorList = ErrorListOf[*Error]

// ErrorListOf is a list of errors that know their order, as
// go/scanner.ErrorList: dag's ErrorList, and the spec loader's (whose
// errors are ordered by position in the spec file).
type ErrorListOf[E ListedError[E]] []E

// ListedError is an error an ErrorListOf can hold: Compare orders two of
// them, as cmp.Compare does.
type ListedError[E any] interface {
	error
	Compare(E) int
}

func (l ErrorListOf[E]) Len() int           { return len(l) }
func (l ErrorListOf[E]) Swap(i, j int)      { l[i], l[j] = l[j], l[i] }
func (l ErrorListOf[E]) Less(i, j int) bool { return l[i].Compare(l[j]) < 0 }

// Sort sorts the list, keeping the order of errors that compare equal.
func (l ErrorListOf[E]) Sort() { slices.SortStableFunc(l, E.Compare) }

// Error lists every problem, one a line.
func (l ErrorListOf[E]) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Err returns nil for an empty list, else the list as an error.
func (l ErrorListOf[E]) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Unwrap lets errors.Is and errors.As look at every error of the list.
func (l ErrorListOf[E]) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Errors lists the *Error values inside err: the elements of an ErrorList
// (which Build returns), of errors joined with errors.Join, or err itself.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if l, ok := err.(ErrorList); ok {
			out = append(out, l...)
			return
		}
		var e *Error
		if errors.As(err, &e) && e == err {
			out = append(out, e)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		if errors.As(err, &e) {
			out = append(out, e)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// ArgTypeError is the cause of the *Error Build reports for a Launch
// argument of a type that is neither a buffer (Access, View, *Buffer) nor a
// number.
type ArgTypeError struct {
	Index int    // the argument's position, from 0
	Type  string // its Go type, as %T prints it
}

func (e *ArgTypeError) Error() string {
	return fmt.Sprintf("argument %d is a %s; pass an Access, View, *Buffer or number", e.Index, e.Type)
}

// OpError is an error that happened while running an operation.
type OpError struct {
	Op  string
	Err error
}

func (e *OpError) Error() string { return fmt.Sprintf("op %q: %v", e.Op, e.Err) }
func (e *OpError) Unwrap() error { return e.Err }
