// Package radix sorts indices by unsigned keys in linear time, for the
// planner's packer and its verifier alike: a sort is not a rule either
// could get wrong for the other.
package radix

// Sort sorts order (indices into keys) by key, stably, through tmp, which
// is at least as long as order.
func Sort(order, tmp []int, keys []uint64) {
	const bits = 11
	var count [1 << bits]int
	var most uint64
	for _, k := range keys {
		most |= k
	}
	for shift := 0; shift < 64 && most>>shift != 0; shift += bits {
		clear(count[:])
		for _, i := range order {
			count[keys[i]>>shift&(1<<bits-1)]++
		}
		at := 0
		for d, c := range count {
			count[d] = at
			at += c
		}
		for _, i := range order {
			d := keys[i] >> shift & (1<<bits - 1)
			tmp[count[d]] = i
			count[d]++
		}
		copy(order, tmp)
	}
}
