package dag

import "strconv"

// FormatBytes writes a size with a binary unit: 512 B, 4.0 KiB, 1.5 MiB.
// Plans, traces and messages about buffers all print sizes this way.
func FormatBytes(n int64) string { return string(AppendBytes(make([]byte, 0, 16), n)) }

// AppendBytes appends FormatBytes(n) to b.
func AppendBytes(b []byte, n int64) []byte {
	const units = "KMGTPE"
	if n < 1024 {
		b = strconv.AppendInt(b, n, 10)
		return append(b, " B"...)
	}
	f, u := float64(n)/1024, 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	b = strconv.AppendFloat(b, f, 'f', 1, 64)
	return append(b, ' ', units[u], 'i', 'B')
}
