package comm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// The script: every collective, on data that differs per rank, with the
// results each rank keeps. It runs on any communicator; reference computes
// what it must give, sequentially and element by element.

var dtypes = []dag.DType{dag.U8, dag.I32, dag.I64, dag.F16, dag.BF16, dag.F32, dag.F64}

const scriptElems = 37 // odd, so that no chunking hides an off-by-one

// rankData is rank r's input for step k: small values so that products stay
// finite, with fractions for floats.
func rankData(dt dag.DType, seed uint64, r, k, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, uint64(r*1000+k)))
	b := make([]byte, int64(n)*dt.Size())
	for i := range n {
		v := rng.IntN(17) - 8
		switch dt {
		case dag.U8:
			b[i] = byte(v)
		case dag.I32:
			put(b, i, int32(v*1000003))
		case dag.I64:
			put(b, i, int64(v)*1e12+int64(i))
		case dag.F32:
			put(b, i, float32(v)/4+0.1)
		case dag.F64:
			put(b, i, float64(v)/8+0.01)
		case dag.F16:
			put(b, i, dag.F16FromFloat32(float32(v)/4))
		case dag.BF16:
			put(b, i, dag.BF16FromFloat32(float32(v)/4))
		}
	}
	return b
}

func put[T number](b []byte, i int, v T) {
	sz := int(unsafe.Sizeof(v))
	copy(b[i*sz:], unsafe.Slice((*byte)(unsafe.Pointer(&v)), sz))
}

// runScript runs the script on c and returns what this rank holds after
// each step.
func runScript(ctx context.Context, c *Comm, dt dag.DType, seed uint64) ([][]byte, error) {
	r, w := c.Rank(), c.World()
	var out [][]byte
	k := 0
	for _, op := range dag.Reductions() {
		buf := rankData(dt, seed, r, k, scriptElems)
		if err := c.AllReduce(ctx, buf, dt, op); err != nil {
			return nil, fmt.Errorf("all_reduce %s: %w", op, err)
		}
		out = append(out, buf)
		k++
	}
	in := rankData(dt, seed, r, k, scriptElems)
	gathered := make([]byte, len(in)*w)
	if err := c.AllGather(ctx, in, gathered); err != nil {
		return nil, err
	}
	out = append(out, gathered)
	k++
	for _, op := range dag.Reductions() {
		in := rankData(dt, seed, r, k, scriptElems*w)
		res := make([]byte, len(in)/w)
		if err := c.ReduceScatter(ctx, in, res, dt, op); err != nil {
			return nil, fmt.Errorf("reduce_scatter %s: %w", op, err)
		}
		out = append(out, res)
		k++
	}
	for root := range w {
		buf := rankData(dt, seed, r, k, scriptElems)
		if err := c.Broadcast(ctx, buf, root); err != nil {
			return nil, err
		}
		out = append(out, buf)
		k++
	}
	// A ring: send to the next rank, receive from the one before; then the
	// other way, receives first on odd ranks.
	next, prev := (r+1)%w, (r+w-1)%w
	send := rankData(dt, seed, r, k, scriptElems)
	recv := make([]byte, len(send))
	if err := c.Send(ctx, send, next); err != nil {
		return nil, err
	}
	if err := c.Recv(ctx, recv, prev); err != nil {
		return nil, err
	}
	out = append(out, recv)
	k++
	send2 := rankData(dt, seed, r, k, scriptElems)
	recv2 := make([]byte, len(send2))
	if r%2 == 1 {
		if err := c.Recv(ctx, recv2, next); err != nil {
			return nil, err
		}
	}
	if err := c.Send(ctx, send2, prev); err != nil {
		return nil, err
	}
	if r%2 == 0 {
		if err := c.Recv(ctx, recv2, next); err != nil {
			return nil, err
		}
	}
	out = append(out, recv2)
	return out, c.Finish(ctx)
}

// reference computes runScript's results for every rank of a world of w.
func reference(w int, dt dag.DType, seed uint64) [][][]byte {
	res := make([][][]byte, w)
	k := 0
	for _, op := range dag.Reductions() {
		var srcs [][]byte
		for r := range w {
			srcs = append(srcs, rankData(dt, seed, r, k, scriptElems))
		}
		red := refReduce(dt, op, srcs)
		for r := range w {
			res[r] = append(res[r], red)
		}
		k++
	}
	var all []byte
	for r := range w {
		all = append(all, rankData(dt, seed, r, k, scriptElems)...)
	}
	for r := range w {
		res[r] = append(res[r], all)
	}
	k++
	for _, op := range dag.Reductions() {
		var srcs [][]byte
		for r := range w {
			srcs = append(srcs, rankData(dt, seed, r, k, scriptElems*w))
		}
		red := refReduce(dt, op, srcs)
		n := len(red) / w
		for r := range w {
			res[r] = append(res[r], red[r*n:(r+1)*n])
		}
		k++
	}
	for root := range w {
		for r := range w {
			res[r] = append(res[r], rankData(dt, seed, root, k, scriptElems))
		}
		k++
	}
	for r := range w {
		res[r] = append(res[r], rankData(dt, seed, (r+w-1)%w, k, scriptElems))
	}
	k++
	for r := range w {
		res[r] = append(res[r], rankData(dt, seed, (r+1)%w, k, scriptElems))
	}
	return res
}

// refReduce reduces element by element, written apart from Reduce.
func refReduce(dt dag.DType, op dag.Reduction, srcs [][]byte) []byte {
	switch dt {
	case dag.U8:
		return refT[uint8](op, srcs, false)
	case dag.I32:
		return refT[int32](op, srcs, false)
	case dag.I64:
		return refT[int64](op, srcs, false)
	case dag.F32:
		return refT[float32](op, srcs, true)
	case dag.F16, dag.BF16:
		// In f32, each result rounded once to the half type.
		wide := make([][]byte, len(srcs))
		for r, s := range srcs {
			wide[r] = make([]byte, 2*len(s))
			for i := range len(s) / 2 {
				put(wide[r], i, halfToFloat(dt, get[uint16](s, i)))
			}
		}
		acc := refT[float32](op, wide, true)
		out := make([]byte, len(srcs[0]))
		for i := range len(out) / 2 {
			put(out, i, halfFromFloat(dt, get[float32](acc, i)))
		}
		return out
	default:
		return refT[float64](op, srcs, true)
	}
}

func get[T number](b []byte, i int) T {
	var v T
	sz := int(unsafe.Sizeof(v))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), sz), b[i*sz:])
	return v
}

func refT[T number](op dag.Reduction, srcs [][]byte, float bool) []byte {
	var zero T
	n := len(srcs[0]) / int(unsafe.Sizeof(zero))
	w := T(len(srcs))
	out := make([]byte, len(srcs[0]))
	for i := range n {
		var acc T
		for r, s := range srcs {
			v := get[T](s, i)
			if op == dag.Avg && float {
				v *= 1 / w // NCCL: multiply by 1/N first, then sum
			}
			switch {
			case r == 0:
				acc = v
			case op == dag.Sum || op == dag.Avg:
				acc += v
			case op == dag.Prod:
				acc *= v
			case op == dag.Max:
				if v > acc {
					acc = v
				}
			case op == dag.Min:
				if v < acc {
					acc = v
				}
			}
		}
		if op == dag.Avg && !float {
			acc /= w
		}
		put(out, i, acc)
	}
	return out
}
