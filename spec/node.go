package spec

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// node is a YAML node of go.yaml.in/yaml/v3: every node carries its line
// and column, and aliases point at their anchor's node.
type node = yaml.Node

// reader turns YAML nodes into values, recording a positioned error for
// every node that is not what the format wants.
type reader struct {
	file  string
	errs  []*Error
	warns []*Error
	// aliasBudget is how many nodes following aliases may still bring into
	// the reading (see maxAliasNodes); sizes memoises anchored subtrees.
	aliasBudget int
	sizes       map[*node]int
	// unknownAliases are the nodes standing for aliases that name no
	// anchor, already reported.
	unknownAliases map[[2]int]bool
	// suggestBudget bounds the work of all did-you-mean suggestions.
	suggestBudget int
	slab          []entry    // see entries
	slabs         int        // slabs made so far, for loader.opDecl
	fieldSlab     []fieldLoc // see loader.opDecl
	// dropped counts the errors beyond MaxErrors, not reported one by one.
	dropped int
	// params are the spec's parameters, once read; nil when it has none.
	params *paramSet
	exprs  *exprCache // the expressions over them, parsed
	// valueReads counts the values read that depend on the parameters'
	// values (expressions of them, and views, whose buffers' sizes may),
	// beyond the leaves of recipes.
	valueReads int
}

func (r *reader) pos(n *node) Position { return r.posAt(locOf(n)) }

// loc is where a node is written, for messages: its line and column,
// from 1; the zero loc stands for the start of the file.
type loc struct{ line, col int32 }

func locOf(n *node) loc {
	if n == nil || n.Line <= 0 {
		return loc{}
	}
	return loc{int32(n.Line), int32(max(n.Column, 1))}
}

func (r *reader) posAt(at loc) Position {
	if at.line <= 0 {
		return Position{File: r.file, Line: 1, Col: 1}
	}
	return Position{File: r.file, Line: int(at.line), Col: int(at.col)}
}

func (r *reader) errorf(n *node, hint, format string, a ...any) {
	r.errorAt(locOf(n), hint, format, a...)
}

func (r *reader) errorAt(at loc, hint, format string, a ...any) {
	if len(r.errs) >= MaxErrors {
		r.dropped++
		return
	}
	r.errs = append(r.errs, &Error{Pos: r.posAt(at), Msg: fmt.Sprintf(format, a...), Hint: hint})
}

func (r *reader) warnAt(at loc, hint, format string, a ...any) {
	r.warns = append(r.warns, &Error{Pos: r.posAt(at), Msg: fmt.Sprintf(format, a...), Hint: hint})
}

// treeSize counts the nodes under n, not following aliases, memoised for
// anchored nodes so that charging an alias is constant work once known.
func (r *reader) treeSize(n *node) int {
	if s, ok := r.sizes[n]; ok {
		return s
	}
	// An explicit stack: the tree may be as deep as the parser allows.
	size := 0
	stack := []*node{n}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		size++
		if x.Kind != yaml.AliasNode {
			stack = append(stack, x.Content...)
		}
	}
	if r.sizes == nil {
		r.sizes = map[*node]int{}
	}
	r.sizes[n] = size
	return size
}

// resolve looks through aliases to the node that holds a value. It returns
// nil, having reported why, for an alias it cannot follow, and for a null
// standing for an alias already reported as naming no anchor.
func (r *reader) resolve(n *node) *node {
	if n != nil && n.Kind != yaml.AliasNode && n.Kind != yaml.DocumentNode && r.unknownAliases == nil {
		return n // the common case, quickly
	}
	for n != nil {
		switch {
		case n.Kind == yaml.AliasNode:
			if n.Alias == nil {
				r.errorf(n, "define the anchor with &"+n.Value+" before using it", "alias *%s names no anchor", n.Value)
				return nil
			}
			if r.aliasBudget < 0 {
				return nil
			}
			r.aliasBudget -= r.treeSize(n.Alias)
			if r.aliasBudget < 0 {
				r.errorf(n, "expand the aliases by hand", "aliases expand to more than %d nodes", maxAliasNodes)
				return nil
			}
			n = n.Alias
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		case r.unknownAliases[[2]int{n.Line, n.Column}] && isNull(n):
			return nil
		default:
			return n
		}
	}
	return nil
}

// tag is n.ShortTag(). The parser gives every node it makes a short tag
// ("!!str", "!!int", ...), which is then the answer; asking the node
// costs more, and a load asks a few times for each of its nodes.
func tag(n *node) string {
	if len(n.Tag) > 2 && n.Tag[0] == '!' && n.Tag[1] == '!' {
		return n.Tag
	}
	return n.ShortTag()
}

func isNull(n *node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && tag(n) == "!!null"
}

// Scalar kinds, as YAML 1.2's core schema resolves them (quoted and block
// scalars are strings).
func isStringNode(n *node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && tag(n) == "!!str"
}
func isIntNode(n *node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && tag(n) == "!!int"
}
func isFloatNode(n *node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && tag(n) == "!!float"
}
func isSeq(n *node) bool { return n != nil && n.Kind == yaml.SequenceNode }
func isMap(n *node) bool { return n != nil && n.Kind == yaml.MappingNode }

// describe says what a node is, for messages.
func describe(n *node) string {
	switch {
	case isNull(n):
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind != yaml.ScalarNode:
		return "an alias"
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return "a block of text"
	}
	switch n.ShortTag() {
	case "!!str":
		return fmt.Sprintf("the string %q", clip(n.Value))
	case "!!int":
		return "the integer " + clip(n.Value)
	case "!!float":
		return "the number " + clip(n.Value)
	case "!!bool":
		return "the boolean " + clip(n.Value)
	}
	return "the value " + clip(n.Value)
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// entry is one key and value of a mapping.
type entry struct {
	key   string
	keyN  *node
	value *node // resolved; nil when an alias could not be followed
}

// fields is a mapping's entries, in order.
type fields struct {
	node *node
	list []entry
}

func (f fields) get(key string) (*node, bool) {
	for _, e := range f.list {
		if e.key == key {
			return e.value, e.value != nil
		}
	}
	return nil, false
}

func (f fields) has(key string) bool {
	for _, e := range f.list {
		if e.key == key {
			return true
		}
	}
	return false
}

// keyNode is where the entry for key is written, for messages about it.
func (f fields) keyNode(key string) *node {
	for _, e := range f.list {
		if e.key == key {
			return e.keyN
		}
	}
	return f.node
}

// entries reads n as a mapping of string keys, without checking the keys.
func (r *reader) entries(n *node, what subject) (fields, bool) {
	n = r.resolve(n)
	switch {
	case n == nil:
		return fields{}, false
	case n.Kind != yaml.MappingNode:
		r.errorf(n, "", "%s must be a mapping, not %s", what, describe(n))
		return fields{}, false
	}
	// The entries of all mappings come from one slab: a spec has a few
	// small mappings per op.
	need := len(n.Content) / 2
	if cap(r.slab)-len(r.slab) < need {
		// From 16 entries, doubling up to 1024: a small spec, loaded again
		// for each shape, clears a few hundred bytes, not 32 KiB.
		r.slab = make([]entry, 0, max(need, min(1024, max(16, 2*cap(r.slab)))))
		r.slabs++
	}
	start := len(r.slab)
	r.slab = r.slab[:start+need]
	f := fields{node: n, list: r.slab[start : start : start+need]}
	ok := true
	var seen map[string]bool
	if len(n.Content) > 16 {
		seen = make(map[string]bool, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key, keyOK := r.key(k, what)
		if !keyOK {
			ok = false
			continue
		}
		dup := false
		if seen != nil {
			dup = seen[key]
			seen[key] = true
		} else {
			dup = f.has(key)
		}
		if dup {
			r.errorf(k, "remove one of them", "%s has key %q twice", what, key)
			ok = false
			continue
		}
		f.list = append(f.list, entry{key: key, keyN: k, value: r.resolve(v)})
	}
	return f, ok
}

func (r *reader) key(k *node, what subject) (string, bool) {
	if k.Kind == yaml.ScalarNode && k.Tag == "!!str" {
		return k.Value, true // the common case, quickly
	}
	if k.Kind == yaml.ScalarNode && tag(k) == "!!merge" {
		r.errorf(k, "write the keys out, or use an alias for the whole value", "merge keys (<<) are not supported")
		return "", false
	}
	v := r.resolve(k)
	switch {
	case v == nil:
		return "", false
	case v.Kind == yaml.ScalarNode && !isNull(v):
		return v.Value, true
	}
	r.errorf(k, "keys are names", "%s has a key that is not a name", what)
	return "", false
}

// mapping reads n as a mapping whose keys are among allowed.
func (r *reader) mapping(n *node, what subject, allowed []string) (fields, bool) {
	f, ok := r.entries(n, what)
	if !ok && f.node == nil {
		return f, false
	}
	return f, r.checkKeys(f, what, allowed) && ok
}

// checkKeys reports the keys of f that are not allowed.
func (r *reader) checkKeys(f fields, what subject, allowed []string) bool {
	ok := true
	for _, e := range f.list {
		if !slices.Contains(allowed, e.key) {
			r.errorf(e.keyN, r.suggest(e.key, allowed), "unknown field %q in %s", e.key, what)
			ok = false
		}
	}
	return ok
}

func (r *reader) sequence(n *node, what subject) ([]*node, bool) {
	v := r.resolve(n)
	switch {
	case v == nil:
		return nil, false
	case v.Kind == yaml.SequenceNode:
		return v.Content, true
	}
	r.errorf(v, "", "%s must be a list, not %s", what, describe(v))
	return nil, false
}

// scalarString is the text of a string node, or false for other nodes.
func scalarString(n *node) (string, bool) {
	if isStringNode(n) {
		return n.Value, true
	}
	return "", false
}

func (r *reader) str(n *node, what subject) (string, bool) {
	n = r.resolve(n)
	if n == nil {
		return "", false
	}
	s, ok := scalarString(n)
	if !ok {
		r.errorf(n, "", "%s must be a string, not %s", what, describe(n))
	}
	return s, ok
}

// oneOf reads a string that must be one of choices.
func (r *reader) oneOf(n *node, what subject, choices []string) (string, bool) {
	s, ok := r.str(n, what)
	if !ok {
		return "", false
	}
	if !slices.Contains(choices, s) {
		r.errorf(n, r.suggest(s, choices), "%s %q is not valid", what, s)
		return "", false
	}
	return s, true
}

// parseInt reads an integer as YAML 1.2's core schema writes it: decimal
// (leading zeros allowed), 0o octal or 0x hexadecimal, with a sign; and,
// as YAML 1.1 tools write them, 0b binary and '_' separators.
func parseInt(s string) (int64, error) {
	t := strings.ReplaceAll(s, "_", "")
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg, t = t[0] == '-', t[1:]
	}
	base := 10
	if len(t) > 2 && t[0] == '0' {
		switch t[1] {
		case 'x', 'X':
			base, t = 16, t[2:]
		case 'o', 'O':
			base, t = 8, t[2:]
		case 'b', 'B':
			base, t = 2, t[2:]
		}
	}
	u, err := strconv.ParseUint(t, base, 64)
	if err != nil {
		return 0, err
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), nil
	case neg && u <= 1<<63:
		return int64(-u), nil
	}
	return 0, strconv.ErrRange
}

// parseFloat reads a float as YAML 1.2's core schema writes it, .inf and
// .nan included.
func parseFloat(s string) (float64, error) {
	switch strings.ToLower(strings.TrimLeft(s, "+")) {
	case ".inf":
		return math.Inf(1), nil
	case "-.inf":
		return math.Inf(-1), nil
	case ".nan":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
}

func (r *reader) integer(n *node, what subject) (int64, bool) {
	n = r.resolve(n)
	switch {
	case n == nil:
		return 0, false
	case isIntNode(n):
		v, err := parseInt(n.Value)
		if err == nil {
			return v, true
		}
		r.errorf(n, "", "%s %s is too large", what, clip(n.Value))
		return 0, false
	case isFloatNode(n):
		// 1e6 is a float in YAML; a whole one within range is as good.
		f, err := parseFloat(n.Value)
		whole := err == nil && f == math.Trunc(f) // false for NaN, true for infinities
		if whole && math.Abs(f) < 1<<63 {
			return int64(f), true
		}
		if whole || err != nil {
			r.errorf(n, "", "%s %s is too large", what, clip(n.Value))
			return 0, false
		}
	}
	if s, isStr := scalarString(n); isStr {
		if v, handled, ok := r.paramValue(n, what, s, false); handled {
			return v, ok
		}
	}
	r.errorf(n, "", "%s must be an integer, not %s", what, describe(n))
	return 0, false
}

// intIn reads an integer in [lo, hi].
func (r *reader) intIn(n *node, what subject, lo, hi int64) (int, bool) {
	v, ok := r.integer(n, what)
	if ok {
		c := inRange(n, what, lo, hi)
		v, ok = c.apply(r, v)
	}
	if !ok {
		return 0, false
	}
	return int(v), true
}

func (r *reader) number(n *node, what subject) (float64, bool) {
	n = r.resolve(n)
	switch {
	case n == nil:
		return 0, false
	case isIntNode(n):
		if v, err := parseInt(n.Value); err == nil {
			return float64(v), true
		}
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err == nil {
			return f, true
		}
	case isFloatNode(n):
		if f, err := parseFloat(n.Value); err == nil {
			return f, true
		}
		r.errorf(n, "", "%s %s is out of range", what, clip(n.Value))
		return 0, false
	}
	r.errorf(n, "", "%s must be a number, not %s", what, describe(n))
	return 0, false
}

func (r *reader) boolean(n *node, what subject) (bool, bool) {
	n = r.resolve(n)
	if n == nil {
		return false, false
	}
	if n.Kind == yaml.ScalarNode && tag(n) == "!!bool" {
		return strings.EqualFold(n.Value, "true"), true
	}
	r.errorf(n, "write true or false", "%s must be a boolean, not %s", what, describe(n))
	return false, false
}

// size reads a byte count: an integer or a string with a unit.
func (r *reader) size(n *node, what subject) (int64, bool) {
	n = r.resolve(n)
	switch {
	case n == nil:
		return 0, false
	case isIntNode(n) || isFloatNode(n):
		b, ok := r.integer(n, what)
		if ok && b < 0 {
			r.errorf(n, sizeHint, "%s %d is negative", what, b)
			return 0, false
		}
		return b, ok
	}
	s, ok := scalarString(n)
	if !ok {
		r.errorf(n, sizeHint, "%s must be a size, not %s", what, describe(n))
		return 0, false
	}
	if !notSize(s) {
		if b, err := parseSize(s); err == nil {
			return b, true
		}
	}
	if v, handled, ok := r.paramValue(n, what, s, true); handled {
		return v, ok
	}
	_, err := parseSize(s)
	r.errorf(n, sizeHint, "%s: %v", what, err)
	return 0, false
}

func (r *reader) duration(n *node, what subject) (time.Duration, bool) {
	n = r.resolve(n)
	if n == nil {
		return 0, false
	}
	s, ok := scalarString(n)
	if !ok {
		if isIntNode(n) && n.Value == "0" {
			return 0, true
		}
		r.errorf(n, durationHint, "%s must be a duration, not %s", what, describe(n))
		return 0, false
	}
	d, err := parseDuration(s)
	if err != nil {
		r.errorf(n, durationHint, "%s: %v", what, err)
		return 0, false
	}
	return d, true
}

// isName reports whether s can name a buffer, kernel or op: a letter or
// underscore, then letters, digits, '_', '-' or '.'. Names never hold the
// brackets and colons of view syntax.
func isName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && (c == '-' || c == '.' || '0' <= c && c <= '9'):
		default:
			return false
		}
	}
	return true
}

// checkName reports whether name can name a thing of kind ("buffer",
// "op", ...), reporting why not at n.
func (r *reader) checkName(n *node, kind, name string) bool {
	switch {
	case len(name) > MaxNameLen:
		r.errorf(n, fmt.Sprintf("use at most %d characters", MaxNameLen), "%s name %q is %d characters long", kind, clip(name), len(name))
		return false
	case !isName(name):
		r.errorf(n, nameHint, "%s name %q is not valid", kind, name)
		return false
	}
	return true
}

const nameHint = "names start with a letter or '_' and hold letters, digits, '_', '-' and '.'"

// fieldLocs maps the fields of a declaration that errors of dag name
// ("after", "args.x", ...) to where they are written: a few per
// declaration, so a list. Keeping places rather than nodes lets the
// collector take each op's part of the YAML tree once it is read.
type fieldLocs []fieldLoc

type fieldLoc struct {
	field string
	at    loc
}

func (f *fieldLocs) set(field string, n *node) {
	at := locOf(n)
	for i := range *f {
		if (*f)[i].field == field {
			(*f)[i].at = at
			return
		}
	}
	*f = append(*f, fieldLoc{field, at})
}

func (f fieldLocs) get(field string) (loc, bool) {
	for _, x := range f {
		if x.field == field {
			return x.at, true
		}
	}
	return loc{}, false
}
