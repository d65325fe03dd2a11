package spec

// Views of buffers, as ops name them.

import (
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// views resolves the buffer names the spec's ops and outputs write, and
// views of those buffers, once the buffers are read.
type views struct {
	*reader
	bufs     map[string]*bufDecl
	bufOrder []string // declaration order, for suggestions
	// decls are the declarations of bufOrder, in its order, in a load
	// from recipes (whose leaves find them by place).
	decls []bufDecl
}

// bufferRef reads a buffer name and returns its declaration, reporting
// unknown names; nil when there is none.
func (vs *views) bufferRef(n *node, what subject) *bufDecl {
	name, ok := vs.str(n, what.and("buffer"))
	if !ok {
		return nil
	}
	d := vs.bufs[name]
	if d == nil {
		vs.errorf(n, vs.suggest(name, vs.bufOrder), "%s names unknown buffer %q", what, name)
	}
	return d
}

// view reads a view of a buffer: "name", "name[start:end]" or a mapping
// {buffer, offset, size} (with mode, for kernel arguments). The mode is 0
// when the spec does not give one.
func (vs *views) view(n *node, what subject, withMode bool) (dag.View, dag.Mode, bool) {
	vs.valueReads++ // its bytes depend on its buffer's size
	return vs.readView(n, what, withMode)
}

// readView is view, not counted among the value reads: the op readers'
// leaves (opReader.viewVal) read views with it.
func (vs *views) readView(n *node, what subject, withMode bool) (dag.View, dag.Mode, bool) {
	n = vs.resolve(n)
	if n == nil {
		return dag.View{}, 0, false
	}
	if s, isStr := scalarString(n); isStr {
		t, err := parseViewText(s, func(bound string) (int64, error) { return vs.viewBound(n, what, bound) })
		if err != nil {
			vs.errorf(n, viewHint, "%s: %v", what, err)
			return dag.View{}, 0, false
		}
		b := vs.viewBuffer(n, what, t.name)
		if b == nil {
			return dag.View{}, 0, false
		}
		if !t.ranged {
			return b.All(), 0, true
		}
		end := b.Size
		if t.hasEnd {
			end = t.end
		}
		v, ok := vs.checkRange(n, what, b, t.start, end)
		return v, 0, ok
	}
	keys := viewKeys
	if !withMode {
		keys = viewKeys[:3]
	}
	f, ok := vs.mapping(n, what, keys)
	if f.node == nil {
		return dag.View{}, 0, false
	}
	bufN, has := f.get("buffer")
	if !has {
		vs.errorf(f.node, "write {buffer: x, offset: 0, size: 1KiB}", "%s has no buffer", what)
		return dag.View{}, 0, false
	}
	name, okN := vs.str(bufN, what.and("buffer"))
	if !okN {
		return dag.View{}, 0, false
	}
	b := vs.viewBuffer(bufN, what, name)
	off, size := int64(0), int64(-1)
	if v, has := f.get("offset"); has {
		var okO bool
		off, okO = vs.size(v, what.and("offset"))
		ok = ok && okO
	}
	if v, has := f.get("size"); has {
		var okS bool
		size, okS = vs.size(v, what.and("size"))
		ok = ok && okS
	}
	var mode dag.Mode
	if v, has := f.get("mode"); has {
		m, okM := vs.oneOf(v, what.and("mode"), modes)
		ok = ok && okM
		mode = parseMode(m)
	}
	if b == nil || !ok {
		return dag.View{}, 0, false
	}
	v, okR := vs.mappedRange(f.node, what, b, off, size)
	return v, mode, okR
}

// mappedRange is the view of a view mapping at n: size bytes of b from
// off, all from off when size is negative.
func (vs *views) mappedRange(n *node, what subject, b *dag.Buffer, off, size int64) (dag.View, bool) {
	end := b.Size
	if size >= 0 {
		end = off + size
		if end < off {
			vs.errorf(n, "", "%s range overflows", what)
			return dag.View{}, false
		}
	}
	return vs.checkRange(n, what, b, off, end)
}

// viewBuffer is the buffer a view names, or nil (reported) when there is
// none.
func (vs *views) viewBuffer(n *node, what subject, name string) *dag.Buffer {
	if !isName(name) {
		vs.errorf(n, viewHint, "%s: %q is not a buffer name", what, name)
		return nil
	}
	d := vs.bufs[name]
	if d == nil {
		vs.errorf(n, vs.suggest(name, vs.bufOrder), "%s names unknown buffer %q", what, name)
		return nil
	}
	return d.buf
}

func (vs *views) checkRange(n *node, what subject, b *dag.Buffer, start, end int64) (dag.View, bool) {
	if start <= b.Size && end <= b.Size && start < end {
		return b.Slice(start, end-start), true
	}
	hint := fmt.Sprintf("%s holds bytes [0:%d)", b.Name, b.Size)
	if start > b.Size || end > b.Size {
		vs.errorf(n, hint, "%s range [%d:%d) is out of range", what, start, end)
	} else {
		vs.errorf(n, hint, "%s range [%d:%d) is empty", what, start, end)
	}
	return dag.View{}, false
}

// viewBound reads the start or end of a view written as text: a size, or
// an expression over the spec's parameters.
func (vs *views) viewBound(n *node, what subject, s string) (int64, error) {
	if !notSize(s) {
		if v, err := parseSize(s); err == nil {
			return v, nil
		}
	}
	if pv, handled, perr := vs.evalParams(s, true); handled {
		if perr != nil {
			return 0, boundExprError(s, perr)
		}
		return pv, nil
	}
	_, err := parseSize(s)
	return 0, err
}

// boundExprError is the error of a view's start or end s, an expression.
func boundExprError(s string, err *exprError) error {
	return fmt.Errorf("%s%s", strings.TrimSpace(s), err.msg)
}
