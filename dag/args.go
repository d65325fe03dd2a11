package dag

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/internal/suggest"
)

// Args are a launch's arguments by parameter name: an Access, View or
// *Buffer for a buffer parameter, a number for a scalar.
type Args map[string]any

// Call launches kernel k over grid x block threads with its arguments by
// name, so that two buffers of one type cannot trade places unnoticed:
//
//	b.Call(dag.Axpy, grid, block, dag.Args{"y": y, "x": x, "alpha": 2})
//
// Every parameter of k is named once; a name k lacks (with the nearest
// one as a hint) or a parameter left out is a Build error at the op. The
// builtins' parameters follow one order, which Launch's positional
// arguments take too: the buffers written first, then those only read,
// then the scalars. Options (Name, a Priority, ...) follow the arguments.
func (g *Builder) Call(k *Kernel, grid, block Dim3, args Args, opts ...OpOption) *Op {
	if k == nil {
		return g.Launch(nil, grid, block).With(opts...)
	}
	pos := make([]any, 0, len(k.Params))
	var missing []string
	for _, p := range k.Params {
		v, ok := args[p.Name]
		if !ok {
			missing = append(missing, p.Name)
			continue
		}
		pos = append(pos, v)
	}
	var unknown []string
	for name := range args {
		if !slices.ContainsFunc(k.Params, func(p Param) bool { return p.Name == name }) {
			unknown = append(unknown, name)
		}
	}
	if len(missing) > 0 || len(unknown) > 0 {
		o := g.Launch(k, grid, block)
		o.extra().nameErrs = callErrors(k, missing, unknown)
		return o.With(opts...)
	}
	return g.Launch(k, grid, block, pos...).With(opts...)
}

// callErrors describes the names of a Call that do not match k's
// parameters: those k lacks, then those left out.
func callErrors(k *Kernel, missing, unknown []string) []*Error {
	slices.Sort(unknown)
	names := make([]string, len(k.Params))
	for i, p := range k.Params {
		names[i] = p.Name
	}
	var errs []*Error
	budget := 1 << 16
	for _, name := range unknown {
		hint := fmt.Sprintf("%s takes %s", k.Name, strings.Join(names, ", "))
		if best, ok := suggest.Nearest(name, names, &budget); ok {
			hint = fmt.Sprintf("did you mean %q?", best)
		}
		errs = append(errs, &Error{Field: "args." + name, Msg: fmt.Sprintf("kernel %s has no parameter %q", k.Name, name), Hint: hint})
	}
	for _, name := range missing {
		errs = append(errs, &Error{Field: "args." + name, Msg: fmt.Sprintf("parameter %s of kernel %s has no argument", name, k.Name),
			Hint: fmt.Sprintf("name every parameter: %s", strings.Join(names, ", "))})
	}
	return errs
}
