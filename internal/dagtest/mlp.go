package dagtest

import (
	"math"

	"github.com/dagrun/dagrun/dag"
)

// MLPRow is one row of the MLP block of examples/mlp_stream*.yaml worked
// out on the host: y = bf16((1/H) bf16(gelu(bf16((1/D) x W1))) W2 + x),
// for x a row of D values, W1 a row-major D x H matrix and W2 an H x D
// one. Its products accumulate in f64 where the devices accumulate in
// f32, so a result may round to the next bf16 value: compare within two
// bf16 steps (1/64 at 1).
func MLPRow(x, w1, w2 []float64, d, h int) []float64 {
	hid := make([]float64, h)
	for p, xp := range x[:d] {
		for j, w := range w1[p*h : (p+1)*h] {
			hid[j] += xp * w
		}
	}
	for j := range hid {
		hid[j] = BF16(GELU(BF16(hid[j] / float64(d))))
	}
	y := make([]float64, d)
	for p, hp := range hid {
		for j, w := range w2[p*d : (p+1)*d] {
			y[j] += hp * w
		}
	}
	for j := range y {
		y[j] = BF16(y[j]/float64(h) + x[j])
	}
	return y
}

// MLPTolerance is how far a device's MLPRow may be from the host's.
const MLPTolerance = 1.0 / 64

// BF16 rounds x to the nearest bf16 value.
func BF16(x float64) float64 { return float64(dag.BF16ToFloat32(dag.BF16FromFloat64(x))) }

// GELU is the tanh form, as the builtin and PyTorch's gelu(approximate="tanh").
func GELU(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}
