package spec

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"

	"github.com/dagrun/dagrun/dag"
)

// Sum is a checksum of a buffer's contents: its size, the sum of its
// elements and a hash of its bytes.
type Sum struct {
	Bytes int
	Sum   float64 // sum of the elements, read as the buffer's DType, in float64
	FNV   uint64  // FNV-1a 64 of the bytes
}

// Checksum sums data read as elements of dt and hashes its bytes. The
// hash and the sum each walk the bytes once, side by side for large
// buffers: FNV-1a goes a byte at a time, 20 ms for 16 MiB, a cost the
// CLI's cold start would otherwise pay on top of the sum.
func Checksum(data []byte, dt dag.DType) Sum {
	s := Sum{Bytes: len(data)}
	hashed := make(chan uint64, 1)
	hash := func() {
		h := fnv.New64a()
		h.Write(data)
		hashed <- h.Sum64()
	}
	if len(data) >= 1<<20 {
		go hash()
	} else {
		hash()
	}
	s.Sum = sumElems(data, dt)
	s.FNV = <-hashed
	return s
}

// sumElems adds up data's whole elements of dt in order, in float64.
func sumElems(data []byte, dt dag.DType) float64 {
	var sum float64
	switch es := int(dt.Size()); dt {
	case dag.F32:
		for i := 0; i+4 <= len(data); i += 4 {
			sum += float64(math.Float32frombits(binary.LittleEndian.Uint32(data[i:])))
		}
	case dag.BF16:
		for i := 0; i+2 <= len(data); i += 2 {
			sum += float64(dag.BF16ToFloat32(binary.LittleEndian.Uint16(data[i:])))
		}
	case dag.U8:
		for _, b := range data {
			sum += float64(b)
		}
	default:
		for i := 0; i+es <= len(data); i += es {
			sum += dag.ElemValue(data[i:], dt)
		}
	}
	return sum
}

func (s Sum) String() string {
	return fmt.Sprintf("bytes=%d sum=%s fnv=%016x", s.Bytes, strconv.FormatFloat(s.Sum, 'g', -1, 64), s.FNV)
}

// checksumStep prints a line "checksum VIEW: SUM" for each of views, which
// the step reads.
func (s *Spec) checksumStep(views []dag.View) dag.HostFunc {
	return func(_ context.Context, mem [][]byte) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.Stdout == nil {
			return nil
		}
		for i, m := range mem {
			if _, err := fmt.Fprintf(s.Stdout, "checksum %s: %s\n", views[i], Checksum(m, views[i].Buf.DType)); err != nil {
				return err
			}
		}
		return nil
	}
}

// saveStep writes the bytes the step reads to path, with WriteFile.
func (s *Spec) saveStep(path string) dag.HostFunc {
	return func(_ context.Context, mem [][]byte) error {
		return s.WriteFile(path, mem[0])
	}
}

// addStep adds v to every element of the view the step works on: integers
// wrap around, f32 adds in f32, f64 in f64, and f16 and bf16 add in float64 and
// round to the dtype once.
func addStep(dt dag.DType, v float64) dag.HostFunc {
	return func(_ context.Context, mem [][]byte) error {
		m := mem[0]
		es := int(dt.Size())
		for i := 0; i+es <= len(m); i += es {
			switch dt {
			case dag.U8:
				m[i] += byte(int64(v))
			case dag.I32:
				x := int32(binary.LittleEndian.Uint32(m[i:])) + int32(int64(v))
				binary.LittleEndian.PutUint32(m[i:], uint32(x))
			case dag.I64:
				x := int64(binary.LittleEndian.Uint64(m[i:])) + int64(v)
				binary.LittleEndian.PutUint64(m[i:], uint64(x))
			case dag.F32:
				x := math.Float32frombits(binary.LittleEndian.Uint32(m[i:])) + float32(v)
				binary.LittleEndian.PutUint32(m[i:], math.Float32bits(x))
			case dag.F64:
				x := math.Float64frombits(binary.LittleEndian.Uint64(m[i:])) + v
				binary.LittleEndian.PutUint64(m[i:], math.Float64bits(x))
			case dag.F16:
				x := float64(dag.F16ToFloat32(binary.LittleEndian.Uint16(m[i:]))) + v
				binary.LittleEndian.PutUint16(m[i:], dag.F16FromFloat64(x))
			case dag.BF16:
				x := float64(dag.BF16ToFloat32(binary.LittleEndian.Uint16(m[i:]))) + v
				binary.LittleEndian.PutUint16(m[i:], dag.BF16FromFloat64(x))
			}
		}
		return nil
	}
}

func (rd *opReader) hostOp(b *dag.Builder, d *opDecl, f fields, _ *node, what subject) *dag.Op {
	step := d.label
	what = what.and(step)
	need := func(key, example string) (*node, bool) {
		v, has := f.get(key)
		if !has && !f.has(key) {
			rd.errorf(f.node, "write "+example, "%s needs %s", what, key)
		}
		return v, has
	}
	switch step {
	case "checksum":
		n, ok := need("reads", "reads: [buffer, ...]")
		if !ok {
			return nil
		}
		items := []*node{n}
		if isSeq(n) {
			items, _ = rd.sequence(n, what.and("reads"))
		}
		if len(items) == 0 {
			rd.errorf(n, "name the buffers to check", "%s reads nothing", what)
			return nil
		}
		for _, it := range items {
			_, okV := rd.viewVal(it, what.and("reads"), false)
			ok = ok && okV
		}
		if !ok {
			return nil
		}
		return made(rd, b, checksumMaker{})
	case "save":
		bufN, okB := need("buffer", "buffer: x")
		pathN, okP := need("path", "path: out.bin")
		if !okB || !okP {
			return nil
		}
		_, okV := rd.viewVal(bufN, what.and("buffer"), false)
		m := saveMaker{n: pathN, what: what.and("path")}
		var okS bool
		m.path, okS = rd.str(pathN, m.what)
		if okS && m.path == "" {
			rd.errorf(pathN, "name a file", "%s path is empty", what)
			okS = false
		}
		okS = okS && m.write(rd)
		if !okV || !okS {
			return nil
		}
		return made(rd, b, m)
	default: // add
		bufN, okB := need("buffer", "buffer: x")
		valN, okV := need("value", "value: 1")
		if !okB || !okV {
			return nil
		}
		_, okW := rd.viewVal(bufN, what.and("buffer"), false)
		x, okX := rd.number(valN, what.and("value"))
		if !okW || !okX {
			return nil
		}
		return made(rd, b, addMaker{x})
	}
}

// checksumMaker makes a checksum step: its leaves are the views it reads.
type checksumMaker struct{}

func (checksumMaker) make(rd *opReader, b *dag.Builder, v []leafValue) *dag.Op {
	views := make([]dag.View, len(v))
	acc := make([]dag.OpOption, len(v))
	for i, x := range v {
		views[i], acc[i] = x.view, dag.In(x.view)
	}
	return b.Host(rd.spec.checksumStep(views), acc...)
}

// saveMaker makes a save step of its leaf, the view, to path as written
// at n ({rank} not expanded).
type saveMaker struct {
	n    *node
	what subject
	path string
}

// write checks the step's path and keeps it among the spec's writes, as
// every load does, whether the view is right or not.
func (m saveMaker) write(rd *opReader) bool {
	_, ok := rd.paths.writePath(m.n, m.what, m.path)
	return ok
}

func (m saveMaker) make(rd *opReader, b *dag.Builder, v []leafValue) *dag.Op {
	p := ExpandRank(m.path, rd.spec.Rank)
	op := b.Host(rd.spec.saveStep(p), dag.In(v[0].view))
	rd.spec.Saves = append(rd.spec.Saves, SaveStep{Op: op, View: v[0].view, Path: p})
	return op
}

// addMaker makes an add step of value: its leaf is the view.
type addMaker struct{ value float64 }

func (m addMaker) make(_ *opReader, b *dag.Builder, v []leafValue) *dag.Op {
	return b.Host(addStep(v[0].view.Buf.DType, m.value), dag.InOut(v[0].view))
}
