package spec

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// expr is an integer expression over a spec's parameters, as sizes, counts,
// views, grids and gemm dimensions may be written: "T", "T * 4096",
// "T*8KiB + 64", "(T + 15) / 16". Numbers may carry a size unit where a
// size is read. Arithmetic is on int64 and every step is checked for
// overflow.
type expr interface {
	eval(env map[string]int64) (int64, error)
	// bounds is an interval that holds every value of the expression
	// while each parameter p ranges over r[p]; exact arithmetic, so an
	// interval past int64 means some value may overflow.
	bounds(r map[string][2]int64) (lo, hi *big.Int, err error)
	names(add func(string))
}

// maxExprLen bounds an expression's text, and with it the parser's work and
// depth.
const maxExprLen = 256

var errOverflow = errors.New("overflows a 64-bit integer")

type (
	numLit  int64
	nameRef string
	negExpr struct{ x expr }
	binExpr struct {
		op   byte
		x, y expr
	}
)

func (n numLit) eval(map[string]int64) (int64, error) { return int64(n), nil }
func (n numLit) bounds(map[string][2]int64) (*big.Int, *big.Int, error) {
	return big.NewInt(int64(n)), big.NewInt(int64(n)), nil
}
func (numLit) names(func(string)) {}

func (n nameRef) eval(env map[string]int64) (int64, error) { return env[string(n)], nil }
func (n nameRef) bounds(r map[string][2]int64) (*big.Int, *big.Int, error) {
	b := r[string(n)]
	return big.NewInt(b[0]), big.NewInt(b[1]), nil
}
func (n nameRef) names(add func(string)) { add(string(n)) }

func (n negExpr) eval(env map[string]int64) (int64, error) {
	v, err := n.x.eval(env)
	if err != nil {
		return 0, err
	}
	if v == math.MinInt64 {
		return 0, errOverflow
	}
	return -v, nil
}
func (n negExpr) bounds(r map[string][2]int64) (*big.Int, *big.Int, error) {
	lo, hi, err := n.x.bounds(r)
	if err != nil {
		return nil, nil, err
	}
	return new(big.Int).Neg(hi), new(big.Int).Neg(lo), nil
}
func (n negExpr) names(add func(string)) { n.x.names(add) }

func (b binExpr) eval(env map[string]int64) (int64, error) {
	x, err := b.x.eval(env)
	if err != nil {
		return 0, err
	}
	y, err := b.y.eval(env)
	if err != nil {
		return 0, err
	}
	switch b.op {
	case '+':
		if (y > 0 && x > math.MaxInt64-y) || (y < 0 && x < math.MinInt64-y) {
			return 0, errOverflow
		}
		return x + y, nil
	case '-':
		if (y < 0 && x > math.MaxInt64+y) || (y > 0 && x < math.MinInt64+y) {
			return 0, errOverflow
		}
		return x - y, nil
	case '*':
		if x == 0 || y == 0 {
			return 0, nil
		}
		p := x * y
		if p/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
			return 0, errOverflow
		}
		return p, nil
	}
	if y == 0 {
		return 0, errors.New("divides by zero")
	}
	if x == math.MinInt64 && y == -1 {
		return 0, errOverflow
	}
	if b.op == '/' {
		return x / y, nil
	}
	return x % y, nil
}

// bounds fails where a step's interval leaves int64, since evaluating it
// would overflow there even if the final value fits.
func (b binExpr) bounds(r map[string][2]int64) (*big.Int, *big.Int, error) {
	lo, hi, err := b.span(r)
	if err == nil && !fitsInt64(lo, hi) {
		err = errOverflow
	}
	return lo, hi, err
}

func (b binExpr) span(r map[string][2]int64) (*big.Int, *big.Int, error) {
	xl, xh, err := b.x.bounds(r)
	if err != nil {
		return nil, nil, err
	}
	yl, yh, err := b.y.bounds(r)
	if err != nil {
		return nil, nil, err
	}
	switch b.op {
	case '+':
		return new(big.Int).Add(xl, yl), new(big.Int).Add(xh, yh), nil
	case '-':
		return new(big.Int).Sub(xl, yh), new(big.Int).Sub(xh, yl), nil
	}
	if b.op != '*' && yl.Sign() <= 0 && yh.Sign() >= 0 {
		return nil, nil, errors.New("may divide by zero")
	}
	if b.op == '%' {
		// |x % y| < |y| and takes x's sign.
		m := new(big.Int).Abs(yl)
		if a := new(big.Int).Abs(yh); a.Cmp(m) > 0 {
			m = a
		}
		m.Sub(m, big.NewInt(1))
		lo, hi := new(big.Int).Neg(m), new(big.Int).Set(m)
		if xl.Sign() >= 0 {
			lo.SetInt64(0)
		}
		if xh.Sign() <= 0 {
			hi.SetInt64(0)
		}
		return lo, hi, nil
	}
	var lo, hi *big.Int
	for _, xv := range []*big.Int{xl, xh} {
		for _, yv := range []*big.Int{yl, yh} {
			v := new(big.Int)
			if b.op == '*' {
				v.Mul(xv, yv)
			} else {
				v.Quo(xv, yv) // truncates, as Go's / does
			}
			if lo == nil || v.Cmp(lo) < 0 {
				lo = v
			}
			if hi == nil || v.Cmp(hi) > 0 {
				hi = v
			}
		}
	}
	return lo, hi, nil
}

func (b binExpr) names(add func(string)) { b.x.names(add); b.y.names(add) }

// exprParser reads an expression; units says whether numbers may carry a
// size unit, known whether a name is a declared parameter.
type exprParser struct {
	s     string
	i     int
	units bool
	known func(string) bool
	depth int
}

// parseExpr reads s as an expression over the names known accepts.
func parseExpr(s string, units bool, known func(string) bool) (expr, error) {
	if len(s) > maxExprLen {
		return nil, fmt.Errorf("the expression is %d characters long, more than %d", len(s), maxExprLen)
	}
	p := &exprParser{s: s, units: units, known: known}
	e, err := p.sum()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(p.s) {
		return nil, fmt.Errorf("unexpected %q at character %d", p.s[p.i:p.i+1], p.i+1)
	}
	return e, nil
}

func (p *exprParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *exprParser) sum() (expr, error) {
	x, err := p.product()
	for err == nil {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			return x, nil
		}
		op := p.s[p.i]
		p.i++
		var y expr
		if y, err = p.product(); err == nil {
			x = binExpr{op: op, x: x, y: y}
		}
	}
	return nil, err
}

func (p *exprParser) product() (expr, error) {
	x, err := p.factor()
	for err == nil {
		p.space()
		if p.i >= len(p.s) || strings.IndexByte("*/%", p.s[p.i]) < 0 {
			return x, nil
		}
		op := p.s[p.i]
		p.i++
		var y expr
		if y, err = p.factor(); err == nil {
			x = binExpr{op: op, x: x, y: y}
		}
	}
	return nil, err
}

func (p *exprParser) factor() (expr, error) {
	if p.depth++; p.depth > 32 {
		return nil, errors.New("the expression nests too deeply")
	}
	defer func() { p.depth-- }()
	p.space()
	if p.i >= len(p.s) {
		return nil, errors.New("the expression ends where a number or a parameter should be")
	}
	switch c := p.s[p.i]; {
	case c == '(':
		p.i++
		e, err := p.sum()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return nil, errors.New("a ( is not closed")
		}
		p.i++
		return e, nil
	case c == '-':
		p.i++
		x, err := p.factor()
		if err != nil {
			return nil, err
		}
		return negExpr{x}, nil
	case c >= '0' && c <= '9':
		return p.number()
	case isNameStart(c):
		j := p.i
		for j < len(p.s) && isNamePart(p.s[j]) {
			j++
		}
		name := p.s[p.i:j]
		if !p.known(name) {
			return nil, fmt.Errorf("%q is not a parameter of the spec", name)
		}
		p.i = j
		return nameRef(name), nil
	default:
		return nil, fmt.Errorf("unexpected %q at character %d", string(c), p.i+1)
	}
}

// number reads digits (with '.' and '_'), then, where sizes are read, a
// unit written right after them or after spaces.
func (p *exprParser) number() (expr, error) {
	j := p.i
	for j < len(p.s) && (p.s[j] >= '0' && p.s[j] <= '9' || p.s[j] == '.' || p.s[j] == '_') {
		j++
	}
	text := p.s[p.i:j]
	if p.units {
		k := j
		for k < len(p.s) && p.s[k] == ' ' {
			k++
		}
		u := k
		for u < len(p.s) && isNamePart(p.s[u]) {
			u++
		}
		if u > k && !p.known(p.s[k:u]) {
			text, j = p.s[p.i:u], u
		}
	}
	var v int64
	var err error
	if p.units {
		v, err = parseSize(text)
	} else {
		v, err = parseInt(strings.ReplaceAll(text, "_", ""))
	}
	if err != nil {
		return nil, fmt.Errorf("%q is not a number: %v", text, err)
	}
	p.i = j
	return numLit(v), nil
}

func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isNamePart(c byte) bool  { return isNameStart(c) || c >= '0' && c <= '9' }
