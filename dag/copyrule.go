package dag

// PageableCopy reports whether a copy between src and dst moves pageable
// host memory to or from a device. CUDA runs such copies synchronously
// with the host (staging them through its own pinned buffer) and a graph
// capture cannot hold them: this is the one home of that rule.
func PageableCopy(src, dst *Buffer) bool {
	if src == nil || dst == nil {
		return false
	}
	return src.Placement == Pageable && dst.Placement == Device ||
		dst.Placement == Pageable && src.Placement == Device
}

// SyncCopy reports whether o is a copy that PageableCopy says is
// synchronous and cannot be captured.
func (o *Op) SyncCopy() bool {
	return o.Kind.Info().Class == CopyClass && len(o.Access) == 2 && PageableCopy(o.Access[0].Buf, o.Access[1].Buf)
}
