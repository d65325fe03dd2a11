package dag

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
)

// FuzzBuild builds small graphs made from the fuzzer's bytes: buffers of
// small and huge sizes, fills, copies, launches and host steps on views
// that overlap (at any byte, one-byte views among them), leave their
// buffer or wrap around int64, explicit after
// edges forwards and backwards. Build must never panic, and every graph
// it accepts must have exactly the dependencies a byte-by-byte reading of
// the rules gives.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{2, 0, 1, 0, 0, 0, 1, 1, 2, 3, 2, 0, 1, 1, 2})
	f.Add([]byte{1, 7, 6, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{3, 2, 3, 4, 9, 1, 1, 1, 9, 1, 2, 3, 9, 9, 9, 4, 4, 4, 0, 0, 0, 8, 8, 8})
	f.Add([]byte("descending ranges and a cycle through after edges"))
	// A pinned buffer of 64 bytes, a host step writing [0,8), another
	// reading [7,12): one byte of overlap.
	f.Add([]byte{0, 2, 64, 2, 5, 0, 90, 7, 0, 1, 5, 0, 90, 4, 7, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, explicit := fuzzGraph(data)
		g, err := b.Build()
		if err != nil {
			if len(Errors(err)) == 0 {
				t.Fatalf("Build's error holds no *Error: %v", err)
			}
			return
		}
		if msg := bruteForceDeps(g, explicit); msg != "" {
			t.Fatal(msg)
		}
	})
}

// reader hands out the fuzzer's bytes, zeros once they run out.
type reader struct{ data []byte }

func (r *reader) byte() byte {
	if len(r.data) == 0 {
		return 0
	}
	c := r.data[0]
	r.data = r.data[1:]
	return c
}

// size is a small size most of the time, sometimes a huge or wrapping one.
func (r *reader) size() int64 {
	switch c := r.byte(); {
	case c < 200:
		return int64(c%32) * 4
	case c < 220:
		return math.MaxInt64 - int64(c-200)
	case c < 240:
		return 1 << (40 + c - 220)
	default:
		return -int64(c - 239)
	}
}

func fuzzGraph(data []byte) (*Builder, map[*Op][]*Op) {
	r := &reader{data}
	b := New()
	user := b.Kernel(&Kernel{Name: "user", Source: CUDAC, Code: "x",
		Params: []Param{{Name: "a", Kind: BufferParam}, {Name: "b", Kind: BufferParam}}})
	nbuf := 1 + int(r.byte()%4)
	var bufs []*Buffer
	for i := range nbuf {
		var opts []BufferOption
		switch r.byte() % 8 {
		case 1:
			opts = append(opts, Temporary())
		case 2, 4:
			opts = append(opts, PinnedHost())
		case 3:
			opts = append(opts, Of(DType(r.byte()%5)))
		}
		size := r.size()
		if size == 0 {
			size = 64
		}
		bufs = append(bufs, b.Buffer(fmt.Sprintf("b%d", i), size, opts...))
	}
	// view is mostly a valid view of n elements (n from the bytes when 0),
	// sometimes whatever the bytes say, out of range or wrapping included.
	view := func(n int64) View {
		buf := bufs[int(r.byte())%len(bufs)]
		switch c := r.byte(); {
		case c < 40:
			return buf.All()
		case c < 60:
			return buf.Slice(r.size(), r.size())
		case c < 100:
			// Any byte, one byte long half the time: views that meet
			// and overlap at odd bytes (kernels refuse most of them,
			// host steps and copies of untyped buffers take them).
			size := 1 + int64(r.byte()%12)
			if c < 80 {
				size = 1
			}
			return buf.Slice(int64(r.byte()%48), size)
		}
		if n == 0 {
			n = 1 + int64(r.byte()%8)
		}
		size := 4 * n
		if size > buf.Size {
			return buf.All()
		}
		off := 4 * int64(r.byte()%16)
		off = min(off, (buf.Size-size)/4*4)
		return buf.Slice(off, size)
	}
	var ops []*Op
	explicit := map[*Op][]*Op{}
	noop := func(context.Context, [][]byte) error { return nil }
	nops := int(r.byte() % 16)
	for range nops {
		var o *Op
		switch r.byte() % 8 {
		case 0:
			o = b.Fill(view(0), float64(int8(r.byte())))
		case 1:
			n := 1 + int64(r.byte()%8)
			o = b.Copy(view(n), view(n))
		case 2:
			n := 1 + int64(r.byte()%8)
			o = b.Launch(Add, Grid1(1), Threads(32), view(n), In(view(n)), In(view(n)))
		case 3:
			o = b.Launch(Scale, Grid1(1+int(r.byte())), Threads(1+int(r.byte()%160)*8), view(0), 2.0)
		case 4:
			o = b.Launch(user, Grid1(1), Threads(1), Access{view(0), Mode(1 + r.byte()%3)}, Access{view(0), Mode(1 + r.byte()%3)})
		case 5:
			o = b.Host(noop, Access{view(0), Mode(1 + r.byte()%3)})
		case 6:
			o = b.Alloc(bufs[int(r.byte())%len(bufs)])
		case 7:
			o = b.Free(bufs[int(r.byte())%len(bufs)])
		}
		ops = append(ops, o)
	}
	// After edges, forwards and backwards, once the ops exist.
	for range int(r.byte() % 4) {
		if len(ops) == 0 {
			break
		}
		o, p := ops[int(r.byte())%len(ops)], ops[int(r.byte())%len(ops)]
		if o != p {
			o.With(After(p))
			explicit[o] = append(explicit[o], p)
		}
	}
	return b, explicit
}

// bruteForceDeps checks g's dependencies against the rules read byte by
// byte (over the elementary ranges every view boundary of a buffer makes):
// op j depends on op i exactly when some byte j uses was last written by i
// before j, or j writes a byte i read since its last write, or j is
// explicitly after i. It returns what is wrong, or "".
func bruteForceDeps(g *Graph, explicit map[*Op][]*Op) string {
	cuts := map[*Buffer][]int64{}
	for _, o := range g.Ops {
		for _, a := range o.Access {
			cuts[a.Buf] = append(cuts[a.Buf], a.Offset, a.Offset+a.Size)
		}
	}
	for b, c := range cuts {
		slices.Sort(c)
		cuts[b] = slices.Compact(c)
	}
	type cell struct {
		writer  int
		readers []int
	}
	cells := map[*Buffer][]cell{}
	for b, c := range cuts {
		cs := make([]cell, len(c))
		for i := range cs {
			cs[i].writer = -1
		}
		cells[b] = cs
	}
	for j, o := range g.Ops {
		if o.ID != j {
			return fmt.Sprintf("op %s has ID %d at index %d", o.Name, o.ID, j)
		}
		want := map[int]bool{}
		for _, p := range explicit[o] {
			want[p.ID] = true
		}
		for _, a := range o.Access {
			c := cuts[a.Buf]
			lo, _ := slices.BinarySearch(c, a.Offset)
			hi, _ := slices.BinarySearch(c, a.Offset+a.Size)
			for k := lo; k < hi; k++ {
				x := &cells[a.Buf][k]
				if x.writer >= 0 && x.writer != j {
					want[x.writer] = true
				}
				if a.Mode.Writes() {
					for _, r := range x.readers {
						if r != j {
							want[r] = true
						}
					}
				}
			}
		}
		for _, a := range o.Access {
			c := cuts[a.Buf]
			lo, _ := slices.BinarySearch(c, a.Offset)
			hi, _ := slices.BinarySearch(c, a.Offset+a.Size)
			for k := lo; k < hi; k++ {
				x := &cells[a.Buf][k]
				if a.Mode.Writes() {
					x.writer, x.readers = j, nil
				} else if !slices.Contains(x.readers, j) {
					x.readers = append(x.readers, j)
				}
			}
		}
		// A write and a read of one op to the same byte: the write wins.
		got := map[int]bool{}
		for _, d := range o.Deps {
			if int(d) >= j {
				return fmt.Sprintf("op %s depends on later op %s", o.Name, g.Ops[d].Name)
			}
			if got[int(d)] {
				return fmt.Sprintf("op %s lists dep %s twice", o.Name, g.Ops[d].Name)
			}
			got[int(d)] = true
		}
		for d := range want {
			if !got[d] {
				return fmt.Sprintf("op %s misses its dependency on %s", o.Name, g.Ops[d].Name)
			}
		}
		for d := range got {
			if !want[d] {
				return fmt.Sprintf("op %s depends on %s, which the rules do not imply", o.Name, g.Ops[d].Name)
			}
		}
	}
	return ""
}
