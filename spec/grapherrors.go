package spec

// The graph's own errors, placed at the spec's lines.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// graphErrors positions the errors of dag.Builder.Build at the YAML nodes
// of the ops, buffers and kernels they name.
func (ds *decls) graphErrors(err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			ds.graphErrors(e)
		}
		return
	}
	e, ok := err.(*dag.Error)
	if !ok {
		if len(ds.errs) == 0 {
			ds.errorf(ds.opsNode, "", "%v", err)
		}
		return
	}
	if len(ds.errs) > 0 && (ds.mayFollow(e) || errors.Is(e, dag.ErrUndefinedRead)) {
		// An op left out for its own error may be what defined the bytes.
		return
	}
	msg := ds.relabel(e.Msg)
	switch {
	case e.Op != "":
		if d := ds.opNamed(e.Op); d != nil {
			msg = ds.label(d) + ": " + msg
		} else {
			msg = fmt.Sprintf("op %q: %s", e.Op, msg)
		}
	case e.Buffer != "":
		msg = fmt.Sprintf("buffer %q: %s", e.Buffer, e.Msg)
	case e.Kernel != "":
		msg = fmt.Sprintf("kernel %q: %s", e.Kernel, e.Msg)
	}
	ds.errs = append(ds.errs, &Error{Pos: ds.posAt(ds.locate(e)), Msg: msg, Hint: ds.relabel(e.Hint)})
}

// mayFollow reports whether a graph error may follow from the ops that
// are missing from the graph because their declarations are wrong: the
// lifetimes of temporary buffers depend on every op that uses them. Other
// problems of an op are its own.
func (ds *decls) mayFollow(e *dag.Error) bool {
	if d := ds.views.bufs[e.Buffer]; e.Buffer != "" && d != nil && d.buf != nil && d.buf.Temporary {
		return true
	}
	d := ds.opNamed(e.Op)
	if d == nil || d.op == nil {
		return e.Op != ""
	}
	for _, a := range d.op.Access {
		if a.Buf.Temporary {
			return true
		}
	}
	return false
}

// relabel writes the made-up op names in a message of the graph as the
// spec's messages name those ops: ops[i].
func (ds *decls) relabel(msg string) string {
	var b strings.Builder
	last := 0
	isNameByte := func(c byte) bool {
		return c == '_' || c == '-' || c == '.' || c == ':' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for i := 0; i < len(msg); {
		if !isNameByte(msg[i]) {
			i++
			continue
		}
		j := i
		for j < len(msg) && isNameByte(msg[j]) {
			j++
		}
		word := strings.TrimRight(msg[i:j], ".:")
		if d := ds.opNamed(word); d != nil && !d.named {
			b.WriteString(msg[last:i])
			b.WriteString(ds.unnamedLabel(d))
			last = i + len(word)
		}
		i = j
	}
	if last == 0 {
		return msg
	}
	b.WriteString(msg[last:])
	return b.String()
}

// locate finds where a graph error is about: the field of the op,
// buffer or kernel it names, else the thing itself, else the ops list.
func (ds *decls) locate(e *dag.Error) loc {
	if e.Op != "" {
		if d := ds.opNamed(e.Op); d != nil {
			if at, ok := d.fields.get(e.Field); ok {
				return at
			}
			if at, ok := d.fields.get("args"); ok && strings.HasPrefix(e.Field, "args") {
				return at
			}
			return d.at
		}
		// The alloc and free the graph adds for a temporary buffer.
		for _, prefix := range []string{"alloc:", "free:"} {
			if name, ok := strings.CutPrefix(e.Op, prefix); ok && ds.views.bufs[name] != nil {
				return locOf(ds.views.bufs[name].node)
			}
		}
	}
	if d := ds.views.bufs[e.Buffer]; e.Buffer != "" && d != nil {
		if at, ok := d.fields.get(e.Field); ok {
			return at
		}
		return locOf(d.node)
	}
	if d := ds.kernels[e.Kernel]; e.Kernel != "" && d != nil {
		return locOf(d.node)
	}
	return locOf(ds.opsNode)
}
