package examples_test

import (
	"math"
	"testing"
)

// jacobiRef is examples/jacobi.yaml computed here, op for op in f32 as the
// builtins round (reduce_sum in f64): x after the loop, and how many
// iterations it ran.
func jacobiRef() ([]float32, int) {
	const n = 4
	x := make([]float32, n)
	for it := 1; it <= 1000; it++ {
		var t [n]float32
		for i := range n {
			var acc float32
			for k := range n {
				acc += float32(1 * x[k]) // J is all ones
			}
			t[i] = acc
			t[i] += float32(-1 * x[i]) // axpy: t - x
		}
		old := append([]float32(nil), x...)
		var s float64
		for i := range n {
			x[i] = 1 + float32(-1*t[i])
			x[i] *= 0.25
			d := x[i] + float32(-1*old[i])
			p := float32(math.Max(float64(d), 0))
			q := float32(math.Max(float64(-d), 0))
			s += float64(p + q)
		}
		if float64(float32(s)) <= 1e-6 {
			return x, it
		}
	}
	return x, 1000
}

// The reference itself converges where the example says, whatever the
// backends can run.
func TestJacobiReference(t *testing.T) {
	x, iters := jacobiRef()
	for i, v := range x {
		if math.Abs(float64(v)-1.0/7) > 1e-6 {
			t.Errorf("x[%d] = %v, want 1/7", i, v)
		}
	}
	if iters != 50 {
		t.Errorf("%d iterations, want 50", iters)
	}
}
