package dag

import "math"

// mulInt64 multiplies non-negative factors; false when the product does not
// fit in an int64.
func mulInt64(fs ...int64) (int64, bool) {
	p := int64(1)
	for _, f := range fs {
		if f < 0 {
			return 0, false
		}
		if f != 0 && p > math.MaxInt64/f {
			return 0, false
		}
		p *= f
	}
	return p, true
}

// AddSat adds a and b, saturating at the limits of int64 instead of
// wrapping around: the one home of saturating sums of sizes and durations.
func AddSat(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}
