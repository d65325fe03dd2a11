package cpu

import (
	"fmt"
	"math"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/hostmem"
)

var (
	_ device.Memory     = (*Backend)(nil)
	_ device.HostBacked = (*Backend)(nil)
)

// FreeMemory reports host memory for every device (device.Memory): the
// cpu backend keeps device buffers in host memory too. Free is the lower
// of /proc/meminfo's MemAvailable and what the cgroup's limit leaves
// (memory.max less memory.current on cgroup v2, memory.limit_in_bytes less
// memory.usage_in_bytes on v1).
func (b *Backend) FreeMemory(ordinal int) (free, total int64, err error) {
	if ordinal < device.HostMemory {
		return 0, 0, fmt.Errorf("cpu: FreeMemory: no device %d", ordinal)
	}
	return hostmem.Available()
}

// DevicesInHostMemory reports that the backend's device buffers are host
// memory, so that admission control adds them to the host's needs.
func (b *Backend) DevicesInHostMemory() bool { return true }

// checkedAllocSize is the size from which an allocation first asks the
// host how much memory is free: below it a failure is the machine's, not
// the spec's, and reading /proc costs more than the allocation.
const checkedAllocSize = 64 << 20

// makeBuffer makes the memory of buf, or says why it cannot: a size
// beyond what the host has free is an error naming buf, never Go's fatal
// "out of memory".
func makeBuffer(buf *dag.Buffer) (mem []byte, err error) {
	if err := checkHostAlloc(buf.Name, buf.Size); err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			mem, err = nil, fmt.Errorf("cannot allocate the %d bytes of buffer %s: %v", buf.Size, buf.Name, p)
		}
	}()
	if buf.Temporary {
		return make([]byte, buf.Size), nil
	}
	return buf.InitialBytes(), nil
}

// checkHostAlloc refuses an allocation of size bytes for buffer name that
// the host cannot hold.
func checkHostAlloc(name string, size int64) error {
	if size < 0 || uint64(size) > math.MaxInt {
		return fmt.Errorf("buffer %s: %d bytes is not a size this machine can allocate", name, size)
	}
	if size < checkedAllocSize {
		return nil
	}
	free, total, err := hostmem.Available()
	if err != nil {
		// Nothing to compare with: the allocation itself is the check.
		return nil
	}
	if size > free {
		return fmt.Errorf("buffer %s needs %s of host memory, and %s of %s is free", name, dag.FormatBytes(size), dag.FormatBytes(free), dag.FormatBytes(total))
	}
	return nil
}

// checkPersistent refuses a graph whose persistent buffers together need
// more host memory than is free, naming the largest; those lent by
// another session (lent[i] not nil) need none.
func checkPersistent(g *dag.Graph, lent [][]byte) error {
	var sum int64
	var largest *dag.Buffer
	for i, buf := range g.Buffers {
		if buf == nil || buf.Temporary || i < len(lent) && lent[i] != nil {
			continue
		}
		if err := checkHostAlloc(buf.Name, buf.Size); err != nil {
			return fmt.Errorf("cpu: Open: %w", err)
		}
		sum = dag.AddSat(sum, buf.Size)
		if largest == nil || buf.Size > largest.Size {
			largest = buf
		}
	}
	if largest == nil || sum < checkedAllocSize {
		return nil
	}
	free, total, err := hostmem.Available()
	if err == nil && sum > free {
		return fmt.Errorf("cpu: Open: the persistent buffers need %s of host memory (the largest, %s, %s), and %s of %s is free",
			dag.FormatBytes(sum), largest.Name, dag.FormatBytes(largest.Size), dag.FormatBytes(free), dag.FormatBytes(total))
	}
	return nil
}
