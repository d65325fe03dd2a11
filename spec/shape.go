package spec

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// Shapes: a spec with parameters as a function from their values to a
// graph, for a program that runs several shapes of it (executor.Shapes).

// At loads the spec again with the parameters values names at those
// values, the others at the values s used, and with the options s was
// loaded with; s.Stdout and s.SaveDir carry over. A name the spec does not
// declare, or a value outside its range, is an error at the declaration,
// as --set's are.
func (s *Spec) At(values map[string]int64) (*Spec, error) {
	if len(s.src) == 0 && s.Graph == nil {
		return nil, fmt.Errorf("%s: At: the spec was not loaded by Load or Parse", s.File)
	}
	// The values, as WithParam gives them, s's beneath the ones given.
	set := make(map[string]int64, len(s.Params)+len(values))
	for _, p := range s.Params {
		set[p.Name] = p.Value
	}
	maps.Copy(set, values)
	at := func(o *options) {
		if o.set == nil {
			o.set = set
		} else {
			maps.Copy(o.set, set)
		}
		o.saveDir = s.SaveDir
		// The range was checked, if asked, by the load of s: not again per
		// shape. Nor is the text parsed again: its document is read at new
		// values.
		o.checkRange, o.again = false, s.again
	}
	r, err := Parse(s.File, s.src, append(slices.Clip(s.opts), at)...)
	if r != nil {
		r.Stdout = s.Stdout
	}
	return r, err
}

// Shape is the graph of the spec at values (At), with the initial
// contents its buffers declare there: a function from the parameters'
// values to a graph, as executor.OpenShapes takes one (s.Shape is an
// executor.ShapeFunc). Its error is At's, naming the values.
func (s *Spec) Shape(ctx context.Context, values map[string]int64) (*dag.Graph, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := s.At(values)
	if err != nil {
		return nil, fmt.Errorf("the spec at %s: %w", FormatValues(values), err)
	}
	return r.Graph, nil
}

// Paddable names the parameters the spec declares paddable: true (for
// executor.WithPaddable).
func (s *Spec) Paddable() []string {
	var names []string
	for _, p := range s.Params {
		if p.Paddable {
			names = append(names, p.Name)
		}
	}
	return names
}

// Values are the values of the parameters this load used, by name.
func (s *Spec) Values() map[string]int64 {
	v := make(map[string]int64, len(s.Params))
	for _, p := range s.Params {
		v[p.Name] = p.Value
	}
	return v
}

// FormatValues writes values as --set takes them, by name: "T=512,U=3".
func FormatValues(values map[string]int64) string {
	var b strings.Builder
	for i, name := range slices.Sorted(maps.Keys(values)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(values[name], 10))
	}
	return b.String()
}
