package cpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

var _ device.Memory = (*Backend)(nil)

// FreeMemory reports host memory for every device (device.Memory): the
// cpu backend keeps device buffers in host memory too. Free is the lower
// of /proc/meminfo's MemAvailable and what the cgroup's limit leaves
// (memory.max less memory.current on cgroup v2, memory.limit_in_bytes less
// memory.usage_in_bytes on v1).
func (b *Backend) FreeMemory(ordinal int) (free, total int64, err error) {
	if ordinal < device.HostMemory {
		return 0, 0, fmt.Errorf("cpu: FreeMemory: no device %d", ordinal)
	}
	return hostMemory()
}

// DevicesInHostMemory reports that the backend's device buffers are host
// memory, so that admission control adds them to the host's needs.
func (b *Backend) DevicesInHostMemory() bool { return true }

// hostMemory is the host memory free and in all, the cgroup's limit
// included.
func hostMemory() (free, total int64, err error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, fmt.Errorf("cpu: read host memory: %w", err)
	}
	free, total = -1, -1
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "MemAvailable" && name != "MemTotal") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
			return 0, 0, fmt.Errorf("cpu: /proc/meminfo: cannot read %s %q", name, rest)
		}
		if name == "MemAvailable" {
			free = kb * 1024
		} else {
			total = kb * 1024
		}
	}
	if free < 0 || total < 0 {
		return 0, 0, errors.New("cpu: /proc/meminfo has no MemAvailable or MemTotal")
	}
	if limit, used, ok := cgroupMemory(); ok {
		total = min(total, limit)
		free = min(free, max(0, limit-used))
	}
	return free, total, nil
}

// cgroupMemory is the memory limit of this process's cgroup and what the
// cgroup uses, when it has a limit (v2 first, then v1).
func cgroupMemory() (limit, used int64, ok bool) {
	v2, v1 := cgroupPaths()
	for _, dir := range v2 {
		if l, u, ok := readLimit(filepath.Join(dir, "memory.max"), filepath.Join(dir, "memory.current")); ok {
			return l, u, true
		}
	}
	for _, dir := range v1 {
		if l, u, ok := readLimit(filepath.Join(dir, "memory.limit_in_bytes"), filepath.Join(dir, "memory.usage_in_bytes")); ok {
			return l, u, true
		}
	}
	return 0, 0, false
}

// cgroupPaths are the directories to look for this process's memory
// cgroup in, its own first, then the mount's root (which is its own
// inside a cgroup namespace).
func cgroupPaths() (v2, v1 []string) {
	const root = "/sys/fs/cgroup"
	data, _ := os.ReadFile("/proc/self/cgroup")
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 || strings.Contains(parts[2], "..") {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = append(v2, filepath.Join(root, parts[2]))
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1 = append(v1, filepath.Join(root, "memory", parts[2]))
		}
	}
	return append(v2, root), append(v1, filepath.Join(root, "memory"))
}

// readLimit reads a cgroup's limit and use; "max", absent files and
// limits beyond any machine (v1 writes a huge number for none) are no
// limit.
func readLimit(limitFile, usedFile string) (limit, used int64, ok bool) {
	l, err1 := os.ReadFile(limitFile)
	u, err2 := os.ReadFile(usedFile)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	limit, err1 = strconv.ParseInt(strings.TrimSpace(string(l)), 10, 64)
	used, err2 = strconv.ParseInt(strings.TrimSpace(string(u)), 10, 64)
	if err1 != nil || err2 != nil || limit <= 0 || limit >= 1<<62 || used < 0 {
		return 0, 0, false
	}
	return limit, used, true
}

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
	free, total, err := hostMemory()
	if err != nil {
		// Nothing to compare with: the allocation itself is the check.
		return nil
	}
	if size > free {
		return fmt.Errorf("buffer %s needs %s of host memory, and %s of %s is free", name, bytesText(size), bytesText(free), bytesText(total))
	}
	return nil
}

// bytesText is n bytes in binary units, exact below a KiB.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// checkPersistent refuses a graph whose persistent buffers together need
// more host memory than is free, naming the largest.
func checkPersistent(g *dag.Graph) error {
	var sum int64
	var largest *dag.Buffer
	for _, buf := range g.Buffers {
		if buf == nil || buf.Temporary {
			continue
		}
		if err := checkHostAlloc(buf.Name, buf.Size); err != nil {
			return fmt.Errorf("cpu: Open: %w", err)
		}
		sum = addSat(sum, buf.Size)
		if largest == nil || buf.Size > largest.Size {
			largest = buf
		}
	}
	if largest == nil || sum < checkedAllocSize {
		return nil
	}
	free, total, err := hostMemory()
	if err == nil && sum > free {
		return fmt.Errorf("cpu: Open: the persistent buffers need %s of host memory (the largest, %s, %s), and %s of %s is free",
			bytesText(sum), largest.Name, bytesText(largest.Size), bytesText(free), bytesText(total))
	}
	return nil
}

// addSat is a+b for sizes, saturated at math.MaxInt64.
func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
