// Package hostmem tells how much host memory a process may still take:
// /proc/meminfo's MemAvailable, capped by the memory limit of the
// process's cgroup (memory.max and memory.current on cgroup v2,
// memory.limit_in_bytes and memory.usage_in_bytes on v1). The backends
// use it for admission control and to check large allocations.
package hostmem

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
)

// Available is the host memory free and in all, the cgroup's limit
// included: free is the lower of /proc/meminfo's MemAvailable and what
// the cgroup's limit leaves.
func Available() (free, total int64, err error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, fmt.Errorf("read host memory: %w", err)
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
			return 0, 0, fmt.Errorf("/proc/meminfo: cannot read %s %q", name, rest)
		}
		if name == "MemAvailable" {
			free = kb * 1024
		} else {
			total = kb * 1024
		}
	}
	if free < 0 || total < 0 {
		return 0, 0, errors.New("/proc/meminfo has no MemAvailable or MemTotal")
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
