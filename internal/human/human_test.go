package human_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/internal/human"
)

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 ns"},
		{80, "80 ns"},
		{999, "999 ns"},
		{time.Microsecond, "1.00 µs"},
		{452336 * time.Nanosecond, "452 µs"},
		{999600 * time.Nanosecond, "1.00 ms"},
		{17903077 * time.Nanosecond, "17.9 ms"},
		{1790307779 * time.Nanosecond, "1.79 s"},
		{59999 * time.Millisecond, "60.0 s"},
		{440 * time.Second, "7.33 min"},
		{90 * time.Minute, "1.50 h"},
		{1234567 * time.Hour, "1234567 h"},
		{-2500 * time.Microsecond, "-2.50 ms"},
		{9996 * time.Microsecond, "10.0 ms"},
		{99960 * time.Microsecond, "100 ms"},
	} {
		assert.Equal(t, tc.want, human.Duration(tc.d), "%d ns", int64(tc.d))
	}
}

func ExampleDuration() {
	fmt.Println(human.Duration(17903077 * time.Nanosecond))
	fmt.Println(human.Duration(1790307779 * time.Nanosecond))
	fmt.Println(human.Duration(452336 * time.Nanosecond))
	// Output:
	// 17.9 ms
	// 1.79 s
	// 452 µs
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"out.bin", "out.bin"},
		{"my dir/spec é.yaml", "my dir/spec é.yaml"},
		{"out\x1b[32mgreen.bin", `"out\x1b[32mgreen.bin"`},
		{"a\nb", `"a\nb"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{"NVIDIA H100\r", `"NVIDIA H100\r"`},
	} {
		assert.Equal(t, tc.want, human.Quote(tc.in), "%q", tc.in)
	}
}

func TestCount(t *testing.T) {
	assert.Equal(t, "1 wait", human.Count(1, "wait", "waits"))
	assert.Equal(t, "0 waits", human.Count(0, "wait", "waits"))
	assert.Equal(t, "12 cross-stream edges", human.Count(12, "cross-stream edge", "cross-stream edges"))
}

func TestFlopsAndBytes(t *testing.T) {
	tests := []struct {
		n            float64
		flops, bytes string
	}{
		{0, "0 FLOP", "0 bytes"},
		{300, "300 FLOP", "300 bytes"},
		{1500, "1500 FLOP", "1.5 kB"},
		{12e6, "12 MFLOP", "12 MB"},
		{4.404e12, "4.4 TFLOP", "4.4e+03 GB"},
		{1.6127e9, "1.61 GFLOP", "1.61 GB"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.flops, human.Flops(tt.n), "%g", tt.n)
		assert.Equal(t, tt.bytes, human.Bytes(tt.n), "%g", tt.n)
	}
}
