package spec

// Parameters: integers a spec declares with a default and a range, which
// sizes, counts, views, grids and gemm dimensions may use in expressions.

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Param is a parameter a spec declares, with the value this load used.
type Param struct {
	Name       string
	Default    int64
	Min, Max   int64
	MultipleOf int64
	// Paddable says that a value between the sizes a session keeps may
	// run on the next larger one (the spec's promise that padding is
	// harmless).
	Paddable bool
	Value    int64
}

// Values is how many values the parameter admits.
func (p Param) Values() int64 { return (p.Max-p.first())/p.MultipleOf + 1 }

// first is the least admissible value.
func (p Param) first() int64 { return (p.Min + p.MultipleOf - 1) / p.MultipleOf * p.MultipleOf }

// Admits reports whether v is a value of the parameter, and if not, why.
func (p Param) Admits(v int64) error {
	switch {
	case v < p.Min || v > p.Max:
		return fmt.Errorf("%s = %d is outside %d..%d", p.Name, v, p.Min, p.Max)
	case v%p.MultipleOf != 0:
		lo := v / p.MultipleOf * p.MultipleOf
		return fmt.Errorf("%s = %d is not a multiple of %d (%d or %d are)", p.Name, v, p.MultipleOf, lo, lo+p.MultipleOf)
	}
	return nil
}

// MaxParamValue bounds a parameter's values, so that a few of them
// multiplied with units still fit sizes' checks.
const MaxParamValue = 1 << 40

// paramKeys are the keys of a parameter's declaration.
var paramDeclKeys = []string{"default", "min", "max", "multiple_of", "paddable"}

// WithParam gives the parameter name the value v instead of its default
// (the CLI's --set name=v). A name the spec does not declare, or a value
// outside its range, is an error of the load.
func WithParam(name string, v int64) Option {
	return func(o *options) {
		if o.set == nil {
			o.set = map[string]int64{}
		}
		o.set[name] = v
	}
}

// maxParamValues bounds the values one --set may list: each is a shape a
// session keeps.
const maxParamValues = 64

// ParseParamValues reads "NAME=V1,V2,..." (the CLI's --set, which dagrun
// run takes with several values, one shape each): the name and its
// values, in order, each a whole number with a unit as sizes take one.
func ParseParamValues(s string) (name string, values []int64, err error) {
	name, text, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return "", nil, errors.New("write NAME=VALUE, for example --set T=512")
	}
	parts := strings.Split(text, ",")
	if len(parts) > maxParamValues {
		return "", nil, fmt.Errorf("%s: %d values; give at most %d", name, len(parts), maxParamValues)
	}
	for _, part := range parts {
		v, err := ParseSize(strings.TrimSpace(part))
		if err != nil {
			return "", nil, fmt.Errorf("%s: %q is not a whole number", name, part)
		}
		if slices.Contains(values, v) {
			return "", nil, fmt.Errorf("%s: %d is given twice", name, v)
		}
		values = append(values, v)
	}
	return name, values, nil
}

// CheckParamRange makes the load check the spec at every value of its
// parameters, not only the ones it uses: every expression for overflow
// and sign at each value (or, past 4096 combinations, over exact bounds of
// the range), and the whole spec at the least and the greatest values (the
// CLI's validate).
func CheckParamRange() Option { return func(o *options) { o.checkRange = true } }

// paramSet is what the reader knows of the parameters while it reads.
type paramSet struct {
	decls      map[string]*Param
	values     map[string]int64
	checkRange bool
}

func (ps *paramSet) known(name string) bool { _, ok := ps.decls[name]; return ok }

// params reads the params: section.
func (l *loader) specParams(n *node, set map[string]int64, checkRange bool) {
	f, ok := l.entries(n, about("params"))
	if !ok {
		return
	}
	declared := make([]paramDeclared, 0, len(f.list))
	for _, e := range f.list {
		name := e.key
		what := about("parameter " + strconv.Quote(name))
		if !isIdent(name) {
			l.errorf(e.keyN, "a parameter name is a letter or _ followed by letters, digits and _", "%s is not a valid name", what)
			continue
		}
		p, okP := l.paramDecl(e.value, what, name)
		if !okP {
			continue
		}
		declared = append(declared, paramDeclared{e.keyN, *p})
	}
	l.declareParams(n, declared, set, checkRange)
	if l.rec != nil {
		l.rec.params, l.rec.paramsN = declared, n
	}
}

// paramDeclared is a parameter as its declaration at n, the params
// mapping, reads: where its name is written, and what it says.
type paramDeclared struct {
	keyN *node
	p    Param
}

// declareParams gives the parameters declared their values, set's where
// it gives them (as --set does), and makes them the load's.
func (l *loader) declareParams(n *node, declared []paramDeclared, set map[string]int64, checkRange bool) {
	ps := &paramSet{decls: make(map[string]*Param, len(declared)), values: make(map[string]int64, len(declared)), checkRange: checkRange}
	params := make([]Param, len(declared))
	for i := range declared {
		p := &params[i]
		*p = declared[i].p
		p.Value = p.Default
		if v, has := set[p.Name]; has {
			if err := p.Admits(v); err != nil {
				// Declared all the same, at its default, so that the
				// expressions using it say nothing more.
				l.errorf(declared[i].keyN, "give --set a value in the range the spec declares", "--set %s: %v", p.Name, err)
			} else {
				p.Value = v
			}
		}
		ps.decls[p.Name] = p
		ps.values[p.Name] = p.Value
	}
	var unknown []string
	for name := range set {
		if _, has := ps.decls[name]; !has {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		l.errorf(n, l.suggest(name, slices.Sorted(maps.Keys(ps.decls))), "--set %s: the spec declares no parameter %q", name, name)
	}
	l.reader.params = ps
	if len(params) > 0 {
		l.spec.Params = slices.Clone(params)
		slices.SortFunc(l.spec.Params, func(a, b Param) int { return strings.Compare(a.Name, b.Name) })
	}
}

func (l *loader) paramDecl(n *node, what subject, name string) (*Param, bool) {
	f, ok := l.mapping(n, what, paramDeclKeys)
	if f.node == nil || !ok {
		if f.node == nil && ok {
			l.errorf(n, "write {default: 2048, min: 16, max: 8192, multiple_of: 16}", "%s must be a mapping", what)
		}
		return nil, false
	}
	p := &Param{Name: name, MultipleOf: 1}
	get := func(key string, dst *int64) bool {
		v, has := f.get(key)
		if !has {
			return true
		}
		x, okI := l.intIn(v, what.and(key), 0, MaxParamValue)
		*dst = int64(x)
		return okI
	}
	dn, hasDefault := f.get("default")
	if !hasDefault {
		l.errorf(f.node, "add default: with the value used when --set does not give one", "%s has no default", what)
		return nil, false
	}
	if !get("default", &p.Default) {
		return nil, false
	}
	p.Min, p.Max = p.Default, p.Default
	if !get("min", &p.Min) || !get("max", &p.Max) || !get("multiple_of", &p.MultipleOf) {
		return nil, false
	}
	if v, has := f.get("paddable"); has {
		if p.Paddable, ok = l.boolean(v, what.and("paddable")); !ok {
			return nil, false
		}
	}
	switch {
	case p.MultipleOf < 1:
		l.errorf(f.node, "use 1 or more", "%s: multiple_of is %d", what, p.MultipleOf)
		return nil, false
	case p.Min > p.Max:
		l.errorf(f.node, "make min at most max", "%s: min %d is greater than max %d", what, p.Min, p.Max)
		return nil, false
	}
	if err := p.Admits(p.Default); err != nil {
		l.errorf(dn, "make the default one of the values the range admits", "%s: default: %v", what, err)
		return nil, false
	}
	return p, true
}

func isIdent(s string) bool {
	if s == "" || !isNameStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isNamePart(s[i]) {
			return false
		}
	}
	return true
}

// maxRangeCombos is how many combinations of parameter values a range
// check evaluates one by one; past it, it bounds the expression instead.
const maxRangeCombos = 4096

// paramValue evaluates s, the text of node n, as an expression over the
// spec's parameters, reporting what is wrong at n. handled is false when
// the spec declares none or s names none of them and is no expression (the
// caller's own message then says what is wrong).
func (r *reader) paramValue(n *node, what subject, s string, units bool) (v int64, handled, ok bool) {
	v, handled, err := r.evalParams(s, units)
	if err != nil {
		r.errorf(n, err.hint, "%s %s%s", what, clip(s), err.msg)
	}
	if handled {
		r.valueReads++
	}
	return v, handled, handled && err == nil
}

// exprError is why an expression has no value, with what to do.
type exprError struct{ msg, hint string }

func (e *exprError) Error() string { return e.msg }

// evalParams is paramValue without the reporting.
func (r *reader) evalParams(s string, units bool) (int64, bool, *exprError) {
	e, handled, err := r.params.parse(r.exprs, s, units)
	if !handled || err != nil {
		return 0, handled, err
	}
	v, err := r.params.value(e, units)
	return v, true, err
}

// parse is the reading of s as evalParams reads it, short of its value:
// what depends on no parameter's value. ps may be nil.
func (ps *paramSet) parse(exprs *exprCache, s string, units bool) (expr, bool, *exprError) {
	if ps == nil || !mentionsParam(s, ps) {
		return nil, false, nil
	}
	e, err := exprs.parse(s, units, ps.known)
	if err != nil {
		return nil, true, &exprError{": " + err.Error(), exprHint(ps)}
	}
	return e, true, nil
}

// value is the value of e, read by parse, at the load's values, checked
// as evalParams checks it.
func (ps *paramSet) value(e expr, units bool) (int64, *exprError) {
	v, err := e.eval(ps.values)
	if err == nil && units && v < 0 {
		err = fmt.Errorf("is %d, negative,", v)
	}
	if err != nil {
		return 0, &exprError{fmt.Sprintf(" %v at %s", err, valuesText(ps.values, e)), "change the expression or the parameter's range"}
	}
	if ps.checkRange {
		if msg := ps.checkAll(e, units); msg != "" {
			return 0, &exprError{" " + msg, "change the expression or narrow the parameter's range"}
		}
	}
	return v, nil
}

// again is what a load of a spec's text leaves for the loads of the same
// text at other values of its parameters (At): the parsed document, the
// expressions read in it, where its paths resolve (from the directories of
// the first load, as its other options are), and its buffers and ops as
// recipes when they can be made again from them (nil otherwise).
type again struct {
	doc     *node
	exprs   *exprCache
	files   files
	recipes *recipes
}

// exprCache keeps the expressions of a spec's text parsed, by their text:
// each load at other values reads the same ones. Its parts are immutable
// once made; loads on several goroutines may share it.
type exprCache struct {
	mu sync.Mutex
	m  map[exprKey]expr
}

type exprKey struct {
	s     string
	units bool
}

// parse is parseExpr, once per text. The names known are the parameters
// the text declares, the same for every load of it.
func (c *exprCache) parse(s string, units bool, known func(string) bool) (expr, error) {
	if c == nil {
		return parseExpr(s, units, known)
	}
	k := exprKey{s, units}
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return e, nil
	}
	e, err := parseExpr(s, units, known)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[exprKey]expr{}
	}
	c.m[k] = e
	c.mu.Unlock()
	return e, nil
}

// checkAll evaluates e at every combination of the values of the
// parameters it uses, or bounds it when there are too many; it returns
// what goes wrong and where, or "".
func (ps *paramSet) checkAll(e expr, nonNegative bool) string {
	var used []*Param
	e.names(func(name string) {
		if p := ps.decls[name]; !slices.Contains(used, p) {
			used = append(used, p)
		}
	})
	combos := int64(1)
	for _, p := range used {
		if combos > maxRangeCombos/p.Values() {
			combos = maxRangeCombos + 1
			break
		}
		combos *= p.Values()
	}
	if combos > maxRangeCombos {
		r := map[string][2]int64{}
		for _, p := range used {
			r[p.Name] = [2]int64{p.first(), p.Max}
		}
		lo, hi, err := e.bounds(r)
		switch {
		case err != nil:
			return fmt.Sprintf("%v somewhere in the parameters' range", err)
		case !lo.IsInt64() || !hi.IsInt64():
			return "may overflow a 64-bit integer in the parameters' range"
		case nonNegative && lo.Sign() < 0:
			return "may be negative in the parameters' range"
		}
		return ""
	}
	env := maps.Clone(ps.values)
	var walk func(i int) string
	walk = func(i int) string {
		if i == len(used) {
			v, err := e.eval(env)
			if err == nil && nonNegative && v < 0 {
				err = fmt.Errorf("is %d, negative,", v)
			}
			if err != nil {
				return fmt.Sprintf("%v at %s", err, valuesText(env, e))
			}
			return ""
		}
		p := used[i]
		for v := p.first(); v <= p.Max; v += p.MultipleOf {
			env[p.Name] = v
			if msg := walk(i + 1); msg != "" {
				return msg
			}
			if v > math.MaxInt64-p.MultipleOf {
				break
			}
		}
		return ""
	}
	return walk(0)
}

// mentionsParam reports whether s could be an expression over ps: it
// names a parameter or holds an operator.
func mentionsParam(s string, ps *paramSet) bool {
	return strings.ContainsAny(s, "+*/%()") || namesAny(s, ps.known)
}

// namesAny reports whether a whole word of s is a name that match accepts.
func namesAny(s string, match func(string) bool) bool {
	for i := 0; i < len(s); {
		if !isNameStart(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isNamePart(s[j]) {
			j++
		}
		if match(s[i:j]) {
			return true
		}
		i = j
	}
	return false
}

func valuesText(env map[string]int64, e expr) string {
	var parts []string
	seen := map[string]bool{}
	e.names(func(name string) {
		if !seen[name] {
			seen[name] = true
			parts = append(parts, fmt.Sprintf("%s = %d", name, env[name]))
		}
	})
	slices.Sort(parts)
	if len(parts) == 0 {
		return "any value"
	}
	return strings.Join(parts, ", ")
}

func exprHint(ps *paramSet) string {
	return "write an integer expression of the parameters (" + strings.Join(slices.Sorted(maps.Keys(ps.decls)), ", ") + ") with + - * / % and parentheses, for example \"T * 4096\""
}

// fitsInt64 reports whether the interval [lo, hi] holds only int64 values.
func fitsInt64(lo, hi *big.Int) bool { return lo.IsInt64() && hi.IsInt64() }
