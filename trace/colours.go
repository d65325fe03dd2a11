package trace

import (
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// The colours of every picture: compute lanes cool grey-blue, copy lanes
// warm, kernels blue, fills teal, copies by direction (h2d orange, d2h red,
// other purple), allocs and frees grey, host steps green, waits dark red.
const (
	computeLaneFill = "#eef2f8"
	copyLaneFill    = "#fcefdf"
	waitColour      = "#a0262f"
)

func laneFill(l Lane) string {
	if l.Copy() {
		return copyLaneFill
	}
	return computeLaneFill
}

// kindFill is the fill of an op box of kind on a stream of laneKind.
func kindFill(kind dag.OpKind, laneKind planner.StreamKind) string {
	switch kind {
	case dag.Launch:
		return "#3f6fa8"
	case dag.Fill:
		return "#72b7b2"
	case dag.Gemm:
		return "#9fc5e8"
	case dag.Copy:
		switch laneKind {
		case planner.CopyH2D:
			return "#f28e2b"
		case planner.CopyD2H:
			return "#d9534f"
		}
		return "#9b6ab0"
	case dag.Alloc, dag.Free:
		return "#b9b4ae"
	case dag.Host:
		return "#59a14f"
	}
	return "#888888"
}

// kindText is the colour of a label on a box of kindFill(kind, laneKind).
func kindText(kind dag.OpKind, laneKind planner.StreamKind) string {
	switch kind {
	case dag.Launch, dag.Host:
		return "#ffffff"
	case dag.Copy:
		if laneKind == planner.CopyH2D {
			return "#1d1d1d"
		}
		return "#ffffff"
	}
	return "#1d1d1d"
}
