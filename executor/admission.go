package executor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// MemoryError is a plan refused before it runs because one memory (a
// device's, or the host's) has less free than the plan needs at its peak.
type MemoryError struct {
	Device      int   // the device ordinal, or device.HostMemory
	Need        int64 // bytes the plan needs there at its peak
	Free, Total int64 // what the backend reported
	// Buffers are what makes the need, largest first: the persistent
	// buffers and the temporaries live at the peak.
	Buffers []*dag.Buffer
}

func (e *MemoryError) Error() string {
	var names []string
	for i, b := range e.Buffers {
		if i == 6 {
			names = append(names, fmt.Sprintf("and %d more", len(e.Buffers)-i))
			break
		}
		kind := "persistent"
		if b.Temporary {
			kind = "temporary"
		}
		names = append(names, fmt.Sprintf("%s (%s, %s)", b.Name, dag.FormatBytes(b.Size), kind))
	}
	return fmt.Sprintf("the plan needs %s of %s at its peak, and %s of %s is free: %s; make the buffers smaller, free temporaries sooner, or run where there is more memory",
		dag.FormatBytes(e.Need), memoryName(e.Device), dag.FormatBytes(e.Free), dag.FormatBytes(e.Total), strings.Join(names, ", "))
}

func memoryName(dev int) string {
	if dev == device.HostMemory {
		return "host memory"
	}
	return fmt.Sprintf("the memory of device %d", dev)
}

// MemoryNeed is what a plan needs of one memory at its peak.
type MemoryNeed struct {
	Device     int   // a device ordinal, or device.HostMemory
	Persistent int64 // the persistent buffers placed there
	// Temporary is the largest set of temporaries live at once there,
	// following the plan's steps in submission order.
	Temporary int64
	// Buffers are the persistent buffers and the temporaries of the peak,
	// largest first.
	Buffers []*dag.Buffer
}

// Bytes is the need in all, saturated at math.MaxInt64.
func (n MemoryNeed) Bytes() int64 { return dag.AddSat(n.Persistent, n.Temporary) }

// MemoryNeeds sums what p needs of each memory at its peak, in the order
// of the memories' numbers (host memory first). With devicesInHost, device
// buffers count as host memory. A temporary counts from the step that
// allocates it to the step that frees it, in the plan's submission order.
func MemoryNeeds(p *planner.Plan, devicesInHost bool) []MemoryNeed {
	if p == nil || p.Graph == nil {
		return nil
	}
	where := func(b *dag.Buffer) int {
		if b.Placement.Host() || devicesInHost {
			return device.HostMemory
		}
		return b.Device
	}
	needs := map[int]*MemoryNeed{}
	need := func(dev int) *MemoryNeed {
		n := needs[dev]
		if n == nil {
			n = &MemoryNeed{Device: dev}
			needs[dev] = n
		}
		return n
	}
	for _, b := range p.Graph.Buffers {
		if b != nil && !b.Temporary {
			n := need(where(b))
			n.Persistent = dag.AddSat(n.Persistent, b.Size)
			n.Buffers = append(n.Buffers, b)
		}
	}
	// The live sets of temporaries, step by step: remember the step of
	// each memory's peak, then replay up to it for the buffers.
	live, peakStep := map[int]int64{}, map[int]int{}
	lifetime := func(st planner.Step) (*dag.Buffer, int64) {
		if st.Kind != planner.Run {
			return nil, 0
		}
		op := p.Graph.Ops[st.Op]
		switch op.Kind.Info().Lifetime {
		case dag.Allocates:
			return op.Buffer(), 1
		case dag.Frees:
			return op.Buffer(), -1
		}
		return nil, 0
	}
	for i, st := range p.Steps {
		b, sign := lifetime(st)
		if b == nil {
			continue
		}
		dev := where(b)
		if sign > 0 {
			live[dev] = dag.AddSat(live[dev], b.Size)
			if n := need(dev); live[dev] > n.Temporary {
				n.Temporary, peakStep[dev] = live[dev], i
			}
		} else {
			live[dev] = max(0, live[dev]-b.Size)
		}
	}
	for dev, last := range peakStep {
		set := map[*dag.Buffer]bool{}
		for _, st := range p.Steps[:last+1] {
			if b, sign := lifetime(st); b != nil && where(b) == dev {
				set[b] = sign > 0
			}
		}
		n := needs[dev]
		for b, in := range set {
			if in {
				n.Buffers = append(n.Buffers, b)
			}
		}
	}
	out := make([]MemoryNeed, 0, len(needs))
	for _, n := range needs {
		slices.SortFunc(n.Buffers, func(a, b *dag.Buffer) int {
			return cmp.Or(cmp.Compare(b.Size, a.Size), cmp.Compare(a.ID, b.ID))
		})
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b MemoryNeed) int { return cmp.Compare(a.Device, b.Device) })
	return out
}

// CheckMemory is admission control: it compares what p needs of each
// memory at its peak (MemoryNeeds) with what b reports free
// (device.Memory) and returns a *MemoryError for the first memory that
// falls short. A backend that cannot tell its memory admits everything;
// so does a memory whose figures it cannot read (the allocations in the
// run are then the check).
func CheckMemory(b device.Backend, p *planner.Plan) error {
	return checkMemory(b, p, func(int) bool { return true })
}

// checkMemory is CheckMemory of the memories that pick says.
func checkMemory(b device.Backend, p *planner.Plan, pick func(memory int) bool) error {
	m, ok := b.(device.Memory)
	if !ok || p == nil {
		return nil
	}
	hb, _ := b.(device.HostBacked)
	for _, n := range MemoryNeeds(p, hb != nil && hb.DevicesInHostMemory()) {
		if n.Bytes() == 0 || !pick(n.Device) {
			continue
		}
		free, total, err := m.FreeMemory(n.Device)
		if err != nil {
			continue
		}
		if n.Bytes() > free {
			return &MemoryError{Device: n.Device, Need: n.Bytes(), Free: free, Total: total, Buffers: n.Buffers}
		}
	}
	return nil
}
