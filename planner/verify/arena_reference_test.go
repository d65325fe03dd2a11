package verify_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/plan"
	"github.com/dagrun/dagrun/planner/verify"
)

// happensBefore is the order a plan's steps impose on its runs, worked out
// apart from the verifier and the packer: each stream keeps the set of
// runs that are done before its next step (its earlier runs, and the sets
// of the events it waited for), an event the set its stream had when it
// was recorded. before[b] holds a when run a completes before run b starts.
type happensBefore struct{ before [][]bool }

func newHappensBefore(p *planner.Plan) happensBefore {
	n := len(p.Graph.Ops)
	done := make([][]bool, len(p.Streams))
	for s := range done {
		done[s] = make([]bool, n)
	}
	events := make([][]bool, p.Events)
	hb := happensBefore{before: make([][]bool, n)}
	for _, st := range p.Steps {
		cur := done[st.Stream]
		switch st.Kind {
		case plan.Run:
			hb.before[st.Op] = slices.Clone(cur)
			cur[st.Op] = true
		case plan.Record:
			events[st.Event] = slices.Clone(cur)
		case plan.Wait:
			for a, ok := range events[st.Event] {
				cur[a] = cur[a] || ok
			}
		}
	}
	return hb
}

// allBefore reports whether every op of xs completes before every op of ys
// starts.
func (hb happensBefore) allBefore(xs, ys []int) bool {
	for _, y := range ys {
		for _, x := range xs {
			if !hb.before[y][x] {
				return false
			}
		}
	}
	return true
}

// temporaryUses lists each temporary's uses by buffer ID: the ops that
// access it other than its Alloc and Free, or those two when no other op
// names it.
func temporaryUses(g *dag.Graph) map[int][]int {
	plain, lifetime := map[int][]int{}, map[int][]int{}
	for _, o := range g.Ops {
		for _, a := range o.Access {
			if !a.Buf.Temporary {
				continue
			}
			uses := plain
			if o.Kind.Info().Lifetime != dag.NoLifetime {
				uses = lifetime
			}
			if !slices.Contains(uses[a.Buf.ID], o.ID) {
				uses[a.Buf.ID] = append(uses[a.Buf.ID], o.ID)
			}
		}
	}
	for b, ops := range lifetime {
		if _, ok := plain[b]; !ok {
			plain[b] = ops
		}
	}
	return plain
}

// arenaConflict is the reference for the arenas' check: the first pair of
// temporaries (by buffer ID) placed on shared bytes of one memory whose
// uses the plan does not order one way or the other, or "" when every
// such pair is ordered.
func arenaConflict(p *planner.Plan) string {
	hb := newHappensBefore(p)
	uses := temporaryUses(p.Graph)
	temps := p.Memory.Temporaries
	for i, x := range temps {
		for _, y := range temps[i+1:] {
			if x.Device != y.Device || x.Bytes == 0 || y.Bytes == 0 ||
				x.Offset >= y.Offset+y.Bytes || y.Offset >= x.Offset+x.Bytes {
				continue
			}
			ux, uy := uses[x.Buffer], uses[y.Buffer]
			if len(ux) == 0 || len(uy) == 0 {
				continue
			}
			if !hb.allBefore(ux, uy) && !hb.allBefore(uy, ux) {
				return fmt.Sprintf("%s and %s", p.Graph.Buffers[x.Buffer].Name, p.Graph.Buffers[y.Buffer].Name)
			}
		}
	}
	return ""
}

// TestVerifyArenaMatchesReference scatters the temporaries of random plans
// (with ops that are the last use of one temporary and the first use of
// another) over random offsets, many on top of each other: Verify must
// refuse an arena exactly when the reference finds two temporaries on
// shared bytes whose uses the steps leave unordered.
func TestVerifyArenaMatchesReference(t *testing.T) {
	graphs := 240
	if testing.Short() {
		graphs = 80
	}
	refused, accepted, handoffs := 0, 0, 0
	for seed := range uint64(graphs) {
		cfg := dagtest.Config{Ops: 20 + int(seed%70), Buffers: 4 + int(seed%10), Seed: int64(seed), Temporaries: true, Handoffs: true,
			Ranges: seed%3 == 0, Devices: 1 + int(seed%2), After: seed%4 == 0, HostBuffers: seed%3 == 1}
		g := dagtest.Random(cfg)
		handoffs += countHandoffs(g)
		p, err := planner.New(g, planner.Streams(1+int(seed%5)))
		require.NoError(t, err, "%+v", cfg)
		require.Empty(t, arenaConflict(p), "the packer's own arena, %+v", cfg)
		require.NoError(t, verify.Verify(p), "%+v", cfg)
		good := p.Memory
		r := rand.New(rand.NewPCG(seed, 11))
		for range 16 {
			m := &plan.Memory{Memories: slices.Clone(good.Memories), Temporaries: slices.Clone(good.Temporaries)}
			slots := 1 + r.IntN(3)
			for k := range m.Temporaries {
				if r.IntN(3) != 0 {
					m.Temporaries[k].Offset = int64(r.IntN(slots)) * plan.ArenaAlign
				}
			}
			for k := range m.Memories {
				for _, tmp := range m.Temporaries {
					if tmp.Device == m.Memories[k].Device {
						m.Memories[k].ArenaBytes = max(m.Memories[k].ArenaBytes, tmp.Offset+tmp.Bytes)
					}
				}
			}
			p.Memory = m
			conflict := arenaConflict(p)
			err := verify.Verify(p)
			if conflict != "" {
				var ve *verify.Error
				require.True(t, errors.As(err, &ve), "%+v: %s share bytes unordered, and Verify said %v", cfg, conflict, err)
				require.Equal(t, verify.ArenaOverlap, ve.Kind, "%+v: %v", cfg, err)
				refused++
			} else {
				require.NoError(t, err, "%+v", cfg)
				accepted++
			}
		}
		p.Memory = good
	}
	require.Positive(t, refused)
	require.Positive(t, accepted)
	require.Positive(t, handoffs, "no op was the last use of one temporary and the first of another")
	t.Logf("refused %d arenas, accepted %d; %d handoffs", refused, accepted, handoffs)
}

// countHandoffs counts the ops that use two temporaries.
func countHandoffs(g *dag.Graph) int {
	n := 0
	for _, o := range g.Ops {
		temps := 0
		for _, a := range o.Access {
			if a.Buf.Temporary {
				temps++
			}
		}
		if temps >= 2 {
			n++
		}
	}
	return n
}

// TestVerifyRefusesOneOpOnSharedBytes: a copy that is the last use of
// temporary t and the first use of temporary u runs while both hold their
// bytes, so t and u may not share any; the packer keeps them apart, and
// Verify refuses an arena that puts them on the same bytes, on one stream
// or many.
func TestVerifyRefusesOneOpOnSharedBytes(t *testing.T) {
	for _, streams := range []int{1, 4} {
		t.Run(fmt.Sprint(streams, " streams"), func(t *testing.T) {
			b := dag.New()
			out := b.Buffer("out", 1024, dag.Of(dag.F32), dag.Zeros())
			tmp := b.Buffer("t", 1024, dag.Of(dag.F32), dag.Temporary())
			next := b.Buffer("u", 1024, dag.Of(dag.F32), dag.Temporary())
			b.Fill(tmp.All(), 1)
			b.Copy(next.All(), tmp.All(), dag.Name("handoff"))
			b.Copy(out.All(), next.All())
			g, err := b.Build()
			require.NoError(t, err)
			p, err := planner.New(g, planner.Streams(streams))
			require.NoError(t, err)
			require.NoError(t, verify.Verify(p))
			require.Empty(t, arenaConflict(p))
			for _, off := range []int64{0, plan.ArenaAlign} {
				m := &plan.Memory{Memories: slices.Clone(p.Memory.Memories), Temporaries: slices.Clone(p.Memory.Temporaries)}
				require.Len(t, m.Temporaries, 2)
				m.Temporaries[0].Offset, m.Temporaries[1].Offset = 0, off // overlapping by a byte or more
				for k := range m.Memories {
					m.Memories[k].ArenaBytes = max(m.Memories[k].ArenaBytes, off+m.Temporaries[1].Bytes)
				}
				bad := &planner.Plan{}
				*bad = *p
				bad.Memory = m
				require.Equal(t, "t and u", arenaConflict(bad))
				err := verify.Verify(bad)
				var ve *verify.Error
				require.True(t, errors.As(err, &ve), "offset %d: %v", off, err)
				assert.Equal(t, verify.ArenaOverlap, ve.Kind)
				assert.Contains(t, ve.Error(), "share bytes")
			}
		})
	}
}

// TestVerifyArenaPlacesToTheSlot: a temporary must get all of its bytes
// and fit its arena to the last slot; one byte or one slot short is
// refused.
func TestVerifyArenaPlacesToTheSlot(t *testing.T) {
	b := dag.New()
	out := b.Buffer("out", 1000, dag.Of(dag.F32))
	tmp := b.Buffer("t", 1000, dag.Of(dag.F32), dag.Temporary())
	b.Fill(tmp.All(), 1)
	b.Copy(out.All(), tmp.All())
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g, planner.Streams(1))
	require.NoError(t, err)
	require.NoError(t, verify.Verify(p))
	good := p.Memory
	require.Len(t, good.Temporaries, 1)
	require.Len(t, good.Memories, 1)
	arena := good.Memories[0].ArenaBytes
	require.Equal(t, good.Temporaries[0].Bytes, arena, "one temporary fills its arena")
	for _, tc := range []struct {
		name   string
		change func(m *plan.Memory)
		msg    string
	}{
		{"a byte short", func(m *plan.Memory) { m.Temporaries[0].Bytes = tmp.Size - 1 }, "bytes of its arena for its"},
		{"a slot past the end", func(m *plan.Memory) { m.Temporaries[0].Offset = plan.ArenaAlign }, "does not fit its arena"},
		{"an arena a slot short", func(m *plan.Memory) { m.Memories[0].ArenaBytes = arena - plan.ArenaAlign }, "does not fit its arena"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &plan.Memory{Memories: slices.Clone(good.Memories), Temporaries: slices.Clone(good.Temporaries)}
			tc.change(m)
			p.Memory = m
			defer func() { p.Memory = good }()
			err := verify.Verify(p)
			var ve *verify.Error
			require.True(t, errors.As(err, &ve), "%v", err)
			assert.Equal(t, verify.ArenaOverlap, ve.Kind)
			assert.Contains(t, ve.Error(), tc.msg)
		})
	}
}
