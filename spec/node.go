package spec

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// maxAliasExpansions bounds how many times aliases are followed, so that a
// spec of nested aliases (a "billion laughs") or an alias inside its own
// anchor cannot make loading take forever.
const maxAliasExpansions = 10000

// reader turns YAML nodes into values, recording a positioned error for
// every node that is not what the format wants.
type reader struct {
	file       string
	errs       []*Error
	warns      []*Error
	anchors    map[string]ast.Node
	expansions int
}

func (r *reader) pos(n ast.Node) Position {
	p := Position{File: r.file, Line: 1, Col: 1}
	if n == nil {
		return p
	}
	switch v := n.(type) {
	case *ast.MappingNode:
		// A block mapping's token is the colon of its first entry; its
		// first key is where a reader sees it start.
		if !v.IsFlowStyle && len(v.Values) > 0 {
			return r.pos(v.Values[0])
		}
	case *ast.MappingValueNode:
		if v.Key != nil {
			return r.pos(v.Key)
		}
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil && tk.Position.Line > 0 {
		p.Line, p.Col = tk.Position.Line, max(tk.Position.Column, 1)
	}
	return p
}

func (r *reader) errorf(n ast.Node, hint, format string, a ...any) {
	r.errs = append(r.errs, &Error{Pos: r.pos(n), Msg: fmt.Sprintf(format, a...), Hint: hint})
}

func (r *reader) warnf(n ast.Node, hint, format string, a ...any) {
	r.warns = append(r.warns, &Error{Pos: r.pos(n), Msg: fmt.Sprintf(format, a...), Hint: hint})
}

// syntaxError positions an error of the YAML parser.
func (r *reader) syntaxError(err error) {
	var ye yaml.Error
	if errors.As(err, &ye) {
		e := &Error{Pos: Position{File: r.file, Line: 1, Col: 1}, Msg: "YAML: " + ye.GetMessage()}
		if tk := ye.GetToken(); tk != nil && tk.Position != nil && tk.Position.Line > 0 {
			e.Pos.Line, e.Pos.Col = tk.Position.Line, max(tk.Position.Column, 1)
		}
		r.errs = append(r.errs, e)
		return
	}
	r.errs = append(r.errs, &Error{Pos: Position{File: r.file, Line: 1, Col: 1}, Msg: "YAML: " + err.Error()})
}

// collectAnchors records every anchor of the document so that aliases can
// be followed wherever they are.
func (r *reader) collectAnchors(root ast.Node) {
	r.anchors = map[string]ast.Node{}
	ast.Walk(anchorVisitor(r.anchors), root)
}

type anchorVisitor map[string]ast.Node

func (v anchorVisitor) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil {
		v[a.Name.GetToken().Value] = a.Value
	}
	return v
}

// resolve looks through anchors, tags and aliases to the node that holds a
// value. It returns nil, having reported why, for an alias it cannot follow.
func (r *reader) resolve(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			r.expansions++
			if r.expansions > maxAliasExpansions {
				if r.expansions == maxAliasExpansions+1 {
					r.errorf(v, "expand the aliases by hand", "aliases are expanded more than %d times", maxAliasExpansions)
				}
				return nil
			}
			name := ""
			if v.Value != nil && v.Value.GetToken() != nil {
				name = v.Value.GetToken().Value
			}
			target, ok := r.anchors[name]
			if !ok {
				r.errorf(v, "define the anchor with &"+name+" before using it", "alias *%s names no anchor", name)
				return nil
			}
			n = target
		default:
			return n
		}
	}
}

// describe says what a node is, for messages.
func describe(n ast.Node) string {
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return "nothing"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		return fmt.Sprintf("the string %q", clip(v.Value))
	case *ast.LiteralNode:
		return "a block of text"
	case *ast.IntegerNode:
		return "the integer " + v.GetToken().Value
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "the number " + v.GetToken().Value
	case *ast.BoolNode:
		return "the boolean " + v.GetToken().Value
	}
	return n.Type().String()
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
	keyN  ast.Node
	value ast.Node // resolved; nil when an alias could not be followed
}

// fields is a mapping's entries, in order.
type fields struct {
	node ast.Node
	list []entry
}

func (f fields) get(key string) (ast.Node, bool) {
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
func (f fields) keyNode(key string) ast.Node {
	for _, e := range f.list {
		if e.key == key {
			return e.keyN
		}
	}
	return f.node
}

// entries reads n as a mapping of string keys, without checking the keys.
func (r *reader) entries(n ast.Node, what string) (fields, bool) {
	n = r.resolve(n)
	var values []*ast.MappingValueNode
	switch v := n.(type) {
	case nil:
		return fields{}, false
	case *ast.MappingNode:
		values = v.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{v}
	default:
		r.errorf(n, "", "%s must be a mapping, not %s", what, describe(n))
		return fields{}, false
	}
	f := fields{node: n}
	ok := true
	seen := map[string]bool{}
	for _, mv := range values {
		key, keyOK := r.key(mv.Key, what)
		if !keyOK {
			ok = false
			continue
		}
		if seen[key] {
			r.errorf(mv.Key, "remove one of them", "%s has key %q twice", what, key)
			ok = false
			continue
		}
		seen[key] = true
		f.list = append(f.list, entry{key: key, keyN: mv.Key, value: r.resolve(mv.Value)})
	}
	return f, ok
}

func (r *reader) key(k ast.MapKeyNode, what string) (string, bool) {
	if k == nil {
		r.errorf(nil, "", "%s has an empty key", what)
		return "", false
	}
	switch v := r.resolve(k).(type) {
	case nil:
		return "", false
	case *ast.MergeKeyNode:
		r.errorf(k, "write the keys out, or use an alias for the whole value", "merge keys (<<) are not supported")
		return "", false
	case *ast.StringNode:
		return v.Value, true
	case ast.ScalarNode:
		if _, isNull := v.(*ast.NullNode); !isNull && v.GetToken() != nil {
			return v.GetToken().Value, true
		}
	}
	r.errorf(k, "keys are names", "%s has a key that is not a name", what)
	return "", false
}

// mapping reads n as a mapping whose keys are among allowed.
func (r *reader) mapping(n ast.Node, what string, allowed []string) (fields, bool) {
	f, ok := r.entries(n, what)
	if !ok && f.node == nil {
		return f, false
	}
	return f, r.checkKeys(f, what, allowed) && ok
}

// checkKeys reports the keys of f that are not allowed.
func (r *reader) checkKeys(f fields, what string, allowed []string) bool {
	ok := true
	for _, e := range f.list {
		if !slices.Contains(allowed, e.key) {
			r.errorf(e.keyN, suggest(e.key, allowed), "unknown field %q in %s", e.key, what)
			ok = false
		}
	}
	return ok
}

func (r *reader) sequence(n ast.Node, what string) ([]ast.Node, bool) {
	switch v := r.resolve(n).(type) {
	case nil:
		return nil, false
	case *ast.SequenceNode:
		out := make([]ast.Node, len(v.Values))
		copy(out, v.Values)
		return out, true
	default:
		r.errorf(v, "", "%s must be a list, not %s", what, describe(v))
		return nil, false
	}
}

// scalarString is the text of a string node, or false for other nodes.
func scalarString(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value != nil {
			return v.Value.Value, true
		}
		return "", true
	}
	return "", false
}

func (r *reader) str(n ast.Node, what string) (string, bool) {
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
func (r *reader) oneOf(n ast.Node, what string, choices []string) (string, bool) {
	s, ok := r.str(n, what)
	if !ok {
		return "", false
	}
	if !slices.Contains(choices, s) {
		r.errorf(n, suggest(s, choices), "%s %q is not valid", what, s)
		return "", false
	}
	return s, true
}

func (r *reader) integer(n ast.Node, what string) (int64, bool) {
	n = r.resolve(n)
	switch v := n.(type) {
	case nil:
		return 0, false
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			return x, true
		case uint64:
			if x <= math.MaxInt64 {
				return int64(x), true
			}
		}
		r.errorf(n, "", "%s %s is too large", what, v.GetToken().Value)
		return 0, false
	}
	r.errorf(n, "", "%s must be an integer, not %s", what, describe(n))
	return 0, false
}

// intIn reads an integer in [lo, hi].
func (r *reader) intIn(n ast.Node, what string, lo, hi int64) (int, bool) {
	v, ok := r.integer(n, what)
	if !ok {
		return 0, false
	}
	if v < lo || v > hi {
		r.errorf(n, fmt.Sprintf("use %d to %d", lo, hi), "%s %d is out of range", what, v)
		return 0, false
	}
	return int(v), true
}

func (r *reader) number(n ast.Node, what string) (float64, bool) {
	n = r.resolve(n)
	switch v := n.(type) {
	case nil:
		return 0, false
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			return float64(x), true
		case uint64:
			return float64(x), true
		}
	case *ast.FloatNode:
		return v.Value, true
	case *ast.InfinityNode:
		return v.Value, true
	case *ast.NanNode:
		return math.NaN(), true
	}
	r.errorf(n, "", "%s must be a number, not %s", what, describe(n))
	return 0, false
}

func (r *reader) boolean(n ast.Node, what string) (bool, bool) {
	n = r.resolve(n)
	if n == nil {
		return false, false
	}
	if v, ok := n.(*ast.BoolNode); ok {
		return v.Value, true
	}
	r.errorf(n, "write true or false", "%s must be a boolean, not %s", what, describe(n))
	return false, false
}

// size reads a byte count: an integer or a string with a unit.
func (r *reader) size(n ast.Node, what string) (int64, bool) {
	n = r.resolve(n)
	switch v := n.(type) {
	case nil:
		return 0, false
	case *ast.IntegerNode:
		b, ok := r.integer(v, what)
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
	b, err := parseSize(s)
	if err != nil {
		r.errorf(n, sizeHint, "%s: %v", what, err)
		return 0, false
	}
	return b, true
}

func (r *reader) duration(n ast.Node, what string) (time.Duration, bool) {
	n = r.resolve(n)
	if n == nil {
		return 0, false
	}
	s, ok := scalarString(n)
	if !ok {
		if v, isInt := n.(*ast.IntegerNode); isInt && v.GetToken().Value == "0" {
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

const nameHint = "names start with a letter or '_' and hold letters, digits, '_', '-' and '.'"
