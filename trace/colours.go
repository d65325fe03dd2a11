package trace

import (
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// The colours of every picture: compute lanes cool grey-blue, copy lanes
// warm; op boxes by kind (kindStyles), copies by direction (copyStyles);
// waits dark red.
const (
	computeLaneFill = "#eef2f8"
	copyLaneFill    = "#fcefdf"
	waitColour      = "#a0262f"
	unknownFill     = "#888888"
	darkText        = "#1d1d1d"
	lightText       = "#ffffff"
)

// overlapRole is what an op kind counts as in the summary's copy/compute
// and collective/compute overlaps.
type overlapRole uint8

const (
	noOverlap  overlapRole = iota
	copyWork               // the copy side
	kernelWork             // the compute side
	commWork               // a collective: the summary's collective/compute overlap
)

// kindStyle is how the trace shows one op kind.
type kindStyle struct {
	label      string // in the legend; kinds that share a label share a key
	fill, text string // the op box and its label; copies on a copy lane of one direction take copyStyles'
	overlap    overlapRole
	// bytesInLabel says that a plan's DOT label shows the bytes the op
	// moves or touches.
	bytesInLabel bool
	// byLane: on a copy lane of one direction the op takes copyStyles'
	// colours (copies).
	byLane bool
	// detail, when set, is the second line of a plan's DOT label; the
	// kind (and bytes, with bytesInLabel) otherwise.
	detail func(op *dag.Op) string
}

// kindStyles is the trace's table of op kinds: every kind of dag.OpKinds()
// has an entry (a test checks).
var kindStyles = map[dag.OpKind]kindStyle{
	dag.Alloc:    {label: "alloc/free", fill: "#b9b4ae", text: darkText, bytesInLabel: true},
	dag.Free:     {label: "alloc/free", fill: "#b9b4ae", text: darkText, bytesInLabel: true},
	dag.Copy:     {label: "copy d2d/other", fill: "#9b6ab0", text: lightText, overlap: copyWork, bytesInLabel: true, byLane: true},
	dag.Fill:     {label: "fill", fill: "#72b7b2", text: darkText, overlap: kernelWork, bytesInLabel: true},
	dag.Memset2D: {label: "fill", fill: "#72b7b2", text: darkText, overlap: kernelWork, bytesInLabel: true},
	dag.Launch:   {label: "kernel", fill: "#3f6fa8", text: lightText, overlap: kernelWork, detail: launchDetail},
	dag.Host:     {label: "host step", fill: "#59a14f", text: lightText},
	dag.Gemm:     {label: "gemm", fill: "#9fc5e8", text: darkText, overlap: kernelWork, detail: gemmDetail},

	dag.AllReduce:     {label: "collective", fill: "#e0a526", text: darkText, overlap: commWork, bytesInLabel: true},
	dag.AllGather:     {label: "collective", fill: "#e0a526", text: darkText, overlap: commWork, bytesInLabel: true},
	dag.ReduceScatter: {label: "collective", fill: "#e0a526", text: darkText, overlap: commWork, bytesInLabel: true},
	dag.Broadcast:     {label: "collective", fill: "#e0a526", text: darkText, overlap: commWork, bytesInLabel: true},
	dag.Send:          {label: "send/recv", fill: "#c78c1e", text: darkText, overlap: commWork, bytesInLabel: true},
	dag.Recv:          {label: "send/recv", fill: "#c78c1e", text: darkText, overlap: commWork, bytesInLabel: true},

	dag.Task: {label: "stream task", fill: "#8cd17d", text: darkText, overlap: kernelWork},

	// A loop or branch is the box around its body's ops; its own span, if a
	// backend gives one, covers them, so it counts as neither side of the
	// overlap (its body's ops do).
	dag.While: {label: "loop/branch", fill: "#d4c8e8", text: darkText, detail: controlDetail},
	dag.If:    {label: "loop/branch", fill: "#d4c8e8", text: darkText, detail: controlDetail},
}

// copyStyles are the colours of copies on the copy lanes of one direction.
var copyStyles = []struct {
	lane              planner.StreamKind
	label, fill, text string
}{
	{planner.CopyH2D, "copy h2d", "#f28e2b", darkText},
	{planner.CopyD2H, "copy d2h", "#d9534f", lightText},
}

func laneFill(l Lane) string {
	if l.Copy() {
		return copyLaneFill
	}
	return computeLaneFill
}

// kindFill is the fill of an op box of kind on a stream of laneKind.
func kindFill(kind dag.OpKind, laneKind planner.StreamKind) string {
	if kindStyles[kind].byLane {
		for _, c := range copyStyles {
			if c.lane == laneKind {
				return c.fill
			}
		}
	}
	if st, ok := kindStyles[kind]; ok {
		return st.fill
	}
	return unknownFill
}

// kindText is the colour of a label on a box of kindFill(kind, laneKind).
func kindText(kind dag.OpKind, laneKind planner.StreamKind) string {
	if kindStyles[kind].byLane {
		for _, c := range copyStyles {
			if c.lane == laneKind {
				return c.text
			}
		}
	}
	if st, ok := kindStyles[kind]; ok {
		return st.text
	}
	return lightText
}

// legendItems are the colour key of the op kinds, in dag.OpKinds() order,
// each label once, copies by direction first.
func legendItems() []struct{ label, fill string } {
	var items []struct{ label, fill string }
	seen := map[string]bool{}
	add := func(label, fill string) {
		if !seen[label] {
			seen[label] = true
			items = append(items, struct{ label, fill string }{label, fill})
		}
	}
	for _, k := range dag.OpKinds() {
		st, ok := kindStyles[k]
		if !ok {
			continue
		}
		if st.byLane {
			for _, c := range copyStyles {
				add(c.label, c.fill)
			}
		}
		add(st.label, st.fill)
	}
	return items
}
