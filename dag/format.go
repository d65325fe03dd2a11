package dag

import "fmt"

// FormatBytes writes a size with a binary unit: 512 B, 4.0 KiB, 1.5 MiB.
// Plans, traces and messages about buffers all print sizes this way.
func FormatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n)/1024, 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	return fmt.Sprintf("%.1f %ciB", f, units[u])
}
