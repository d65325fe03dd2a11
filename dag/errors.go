package dag

import (
	"errors"
	"fmt"
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

// Errors lists the *Error values inside err, which Build joins.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
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

// OpError is an error that happened while running an operation.
type OpError struct {
	Op  string
	Err error
}

func (e *OpError) Error() string { return fmt.Sprintf("op %q: %v", e.Op, e.Err) }
func (e *OpError) Unwrap() error { return e.Err }
