package plan

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// writeMemory writes the plan's memory for people: per memory the
// persistent bytes, the peak of temporaries and what is live then, and the
// arena against the temporaries' sum.
func (p *Plan) writeMemory(w *bufio.Writer) {
	m := p.Memory
	if m == nil || len(m.Memories) == 0 {
		return
	}
	w.WriteString("memory\n")
	for _, u := range m.Memories {
		fmt.Fprintf(w, "  %-20s persistent %s", MemoryName(u.Device), dag.FormatBytes(u.Persistent))
		if u.Temporaries == 0 {
			w.WriteByte('\n')
			continue
		}
		temps := "temporaries"
		if u.Temporaries == 1 {
			temps = "temporary"
		}
		fmt.Fprintf(w, ", temporaries peak %s, arena %s (%d %s, %s in all)\n",
			dag.FormatBytes(u.TemporaryPeak), dag.FormatBytes(u.ArenaBytes), u.Temporaries, temps, dag.FormatBytes(u.TemporaryBytes))
		var names, ops []string
		for i, id := range u.Peak {
			names = append(names, p.bufferName(id))
			ops = append(ops, p.opName(u.PeakOps[i]))
		}
		fmt.Fprintf(w, "    live at the peak: %s (first used by %s)\n", clip(names, 8), clip(ops, 8))
		if u.SubmittedPeak != u.TemporaryPeak {
			fmt.Fprintf(w, "    allocated at once in step order (what a pool holds in an eager run): %s\n", dag.FormatBytes(u.SubmittedPeak))
		}
	}
}

func (p *Plan) bufferName(id int) string {
	if p.Graph != nil && id >= 0 && id < len(p.Graph.Buffers) && p.Graph.Buffers[id] != nil {
		return p.Graph.Buffers[id].Name
	}
	return fmt.Sprintf("#%d", id)
}

// clip joins up to n names and counts the rest.
func clip(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}

// The JSON form of a plan's memory; field names are part of dagrun's
// interface.
type (
	jsonMemory struct {
		Memories    []jsonMemoryUse `json:"memories"`
		Temporaries []jsonTemporary `json:"temporaries"`
	}
	jsonMemoryUse struct {
		Device             int      `json:"device"` // -1: pinned host memory, -2: pageable host memory
		Memory             string   `json:"memory"`
		PersistentBytes    int64    `json:"persistent_bytes"`
		TemporaryPeakBytes int64    `json:"temporary_peak_bytes"`
		ArenaBytes         int64    `json:"arena_bytes"`
		TemporaryBytes     int64    `json:"temporary_bytes"`      // the temporaries' sum
		SubmittedPeakBytes int64    `json:"submitted_peak_bytes"` // allocated at once in step order: a pool's hold
		Temporaries        int      `json:"temporaries"`
		Peak               []string `json:"peak,omitempty"`     // the temporaries live together at the peak
		PeakOps            []string `json:"peak_ops,omitempty"` // the first use of each
	}
	jsonTemporary struct {
		Buffer string `json:"buffer"`
		Device int    `json:"device"`
		Bytes  int64  `json:"bytes"`
		Offset int64  `json:"offset"`
		Alloc  string `json:"alloc,omitempty"` // the op that allocates it
		Free   string `json:"free,omitempty"`  // the op that frees it
	}
)

func (p *Plan) jsonMemory() *jsonMemory {
	m := p.Memory
	if m == nil {
		return nil
	}
	out := &jsonMemory{Memories: []jsonMemoryUse{}, Temporaries: []jsonTemporary{}}
	for _, u := range m.Memories {
		ju := jsonMemoryUse{Device: u.Device, Memory: MemoryName(u.Device), PersistentBytes: u.Persistent,
			TemporaryPeakBytes: u.TemporaryPeak, ArenaBytes: u.ArenaBytes, TemporaryBytes: u.TemporaryBytes, Temporaries: u.Temporaries,
			SubmittedPeakBytes: u.SubmittedPeak}
		for i, id := range u.Peak {
			ju.Peak = append(ju.Peak, p.bufferName(id))
			ju.PeakOps = append(ju.PeakOps, p.opName(u.PeakOps[i]))
		}
		out.Memories = append(out.Memories, ju)
	}
	for _, t := range m.Temporaries {
		jt := jsonTemporary{Buffer: p.bufferName(t.Buffer), Device: t.Device, Bytes: t.Bytes, Offset: t.Offset}
		if t.Alloc >= 0 {
			jt.Alloc = p.opName(t.Alloc)
		}
		if t.Free >= 0 {
			jt.Free = p.opName(t.Free)
		}
		out.Temporaries = append(out.Temporaries, jt)
	}
	return out
}
