// Package human writes figures and names for people to read: durations
// with three significant digits and a unit, the one format of every text
// dagrun prints (17.9 ms, 1.79 s, 452 µs, 80 ns, 7.33 min), counts of
// floating-point operations and bytes (4.4 TFLOP, 1.61 GB), and strings
// from files quoted where they would not print as they are.
package human

import (
	"math"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// units are the units a duration is written in, largest first.
var units = [...]struct {
	name string
	size time.Duration
}{{"h", time.Hour}, {"min", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"µs", time.Microsecond}}

// Duration writes d with three significant digits (more above 999 h) in
// the largest unit (h, min, s, ms, µs, ns) that leaves at least 1 of it.
func Duration(d time.Duration) string {
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	for i, u := range units {
		if d < u.size {
			continue
		}
		s, r := digits3(float64(d) / float64(u.size))
		if r >= 1000 && i > 0 {
			// 999.6 µs rounds to 1000 µs: say 1.00 ms.
			u = units[i-1]
			s, _ = digits3(float64(d) / float64(u.size))
		}
		return neg + s + " " + u.name
	}
	return neg + strconv.FormatInt(int64(d), 10) + " ns"
}

// Flops writes n floating-point operations with three significant digits
// in the largest unit that leaves at least 1: 4.4 TFLOP, 12 MFLOP, 300 FLOP.
func Flops(n float64) string {
	return scaled(n, "FLOP", [...]scale{{"TFLOP", 1e12}, {"GFLOP", 1e9}, {"MFLOP", 1e6}})
}

// Bytes writes n bytes with three significant digits in decimal units:
// 1.61 GB, 512 kB, 12 bytes.
func Bytes(n float64) string {
	return scaled(n, "bytes", [...]scale{{"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}})
}

type scale struct {
	name string
	size float64
}

// scaled writes n in the first of units that leaves at least 1 of it,
// else as a whole number of one.
func scaled(n float64, one string, units [3]scale) string {
	for _, u := range units {
		if n >= u.size {
			return strconv.FormatFloat(n/u.size, 'g', 3, 64) + " " + u.name
		}
	}
	return strconv.FormatFloat(n, 'f', 0, 64) + " " + one
}

// digits3 writes v (at least 1) with three significant digits, or as a
// whole number from 1000 up, and returns the value written.
func digits3(v float64) (string, float64) {
	decimals := max(2-int(math.Floor(math.Log10(v))), 0)
	scale := math.Pow10(decimals)
	r := math.Round(v*scale) / scale
	if decimals > 0 && r >= math.Pow10(3-decimals) {
		// Rounding carried into a new digit (9.996 is 10.0).
		decimals--
	}
	return strconv.FormatFloat(r, 'f', decimals, 64), r
}

// Quote writes s as it is where every character of it prints, and quoted
// as a Go string (as names are) otherwise: a file name or a device name
// read from a file could hold control characters that move a terminal's
// cursor or recolour what follows.
func Quote(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}

// Count writes n and the noun for n of it: "1 wait", "3 waits", "0 waits".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
