package main

import (
	"bytes"
	"testing"
)

// TestWriteMemoryReports: a memory the backend measured shows its figure
// and how it was measured; one it did not, while it measures others (on
// CUDA: host memories, or the pool where only replays ran), says so
// without blaming the backend; a backend that measures nothing is named.
// In a pool (not arenas), what the steps allocate at once in submission
// order is shown where it differs from the peak: the pool's own figure.
func TestWriteMemoryReports(t *testing.T) {
	n := int64(3 << 20)
	var buf bytes.Buffer
	writeMemoryReports(&buf, []memoryReport{
		{Memory: "device 0", PlannedPeakBytes: 2 << 20, PlannedArenaBytes: 2 << 20, PlannedSubmittedBytes: 3 << 20, MeasuredPeakBytes: &n, measures: true},
		{Memory: "pinned host memory", PlannedPeakBytes: 4096, PlannedArenaBytes: 4096, PlannedSubmittedBytes: 4096, measures: true},
		{Memory: "device 1", PlannedPeakBytes: 1024, PlannedArenaBytes: 1024, PlannedSubmittedBytes: 1024, Arena: true},
	})
	want := "memory device 0: temporaries planned peak 2.0 MiB, arena 2.0 MiB, 3.0 MiB allocated at once in step order; measured 3.0 MiB (at most live at once)\n" +
		"memory pinned host memory: temporaries planned peak 4.0 KiB, arena 4.0 KiB; measured not measured\n" +
		"memory device 1: temporaries planned peak 1.0 KiB, arena 1.0 KiB; measured not measured by this backend\n"
	if got := buf.String(); got != want {
		t.Errorf("got:\n%swant:\n%s", got, want)
	}
}
