package plan

import "encoding/json"

// The JSON form of a plan; field names are part of dagrun's interface.
type (
	jsonPlan struct {
		Streams []jsonStream `json:"streams"`
		Steps   []jsonStep   `json:"steps"`
		Events  []jsonEvent  `json:"events"`
		Stats   jsonStats    `json:"stats"`
		Memory  *jsonMemory  `json:"memory,omitempty"`
		Budget  *jsonBudget  `json:"memory_budget,omitempty"`
		Passes  []jsonPass   `json:"passes,omitempty"`
		// Fused are the ops that run several declared ops (fused.go).
		Fused []jsonFused `json:"fused,omitempty"`
		// Split are the declared ops run in pieces, each with its pieces.
		Split []jsonSplit `json:"split,omitempty"`
	}
	// jsonPass is what one pass of the planning did (Plan.Passes).
	jsonPass struct {
		Name    string `json:"name"`
		Scope   string `json:"scope"`
		Runs    int    `json:"runs"`
		TookNS  int64  `json:"took_ns"`
		Summary string `json:"summary,omitempty"`
	}
	// jsonBudget is what meeting the memory budget cost (Plan.Budget).
	jsonBudget struct {
		Orderings       int   `json:"orderings"`
		Dependencies    int   `json:"dependencies"`
		UnconstrainedNS int64 `json:"unconstrained_makespan_ns"`
	}
	jsonStream struct {
		ID       int    `json:"id"`
		Name     string `json:"name"`
		Device   int    `json:"device"`
		Priority int    `json:"priority"`
		Kind     string `json:"kind"`
	}
	jsonStep struct {
		Kind   string `json:"kind"`
		Stream int32  `json:"stream"`
		Op     string `json:"op"`              // run: the op; record: the op it follows; wait: the op it precedes; "" for a body's fork and join
		Event  *int32 `json:"event,omitempty"` // record, wait
		// Bodies are the plans of a loop's or branch's bodies (run steps
		// of While and If ops): its body, or its then and else branches.
		Bodies []*jsonPlan `json:"bodies,omitempty"`
		// Early: a run step whose kernel launches early (Plan.Early).
		Early bool `json:"early,omitempty"`
	}
	jsonEvent struct {
		ID      int    `json:"id"`
		Stream  int32  `json:"stream"`
		AfterOp string `json:"after_op"`
	}
	jsonStats struct {
		Ops            int    `json:"ops"`
		Streams        int    `json:"streams"`
		CrossEdges     int    `json:"cross_edges"`
		Waits          int    `json:"waits"`
		MakespanNS     int64  `json:"makespan_ns"`
		CriticalPathNS int64  `json:"critical_path_ns"`
		Mode           string `json:"mode"`                  // what the makespan is estimated for: eager or replay
		Strategy       string `json:"strategy"`              // how the ops were placed: list or declared
		EarlyEdges     int    `json:"early_edges,omitempty"` // launches that go early (Plan.Early)
	}
)

// MarshalJSON writes the plan as JSON: streams, steps in submission order
// (ops by name), events with the stream and op they are recorded after, and
// the figures (durations in nanoseconds).
func (p *Plan) MarshalJSON() ([]byte, error) { return json.Marshal(p.toJSON()) }

// toJSON is the plan in its JSON form, its bodies' plans nested under
// the run steps of their control ops.
func (p *Plan) toJSON() *jsonPlan {
	out := &jsonPlan{
		Streams: make([]jsonStream, len(p.Streams)),
		Steps:   make([]jsonStep, len(p.Steps)),
		Events:  make([]jsonEvent, p.Events),
		Stats: jsonStats{
			Ops:            p.Stats.Ops,
			Streams:        p.Stats.Streams,
			CrossEdges:     p.Stats.CrossEdges,
			Waits:          p.Stats.Waits,
			MakespanNS:     int64(p.Stats.Makespan),
			CriticalPathNS: int64(p.Stats.CriticalPath),
			Mode:           p.Stats.Mode.String(),
			Strategy:       p.Stats.Strategy.String(),
			EarlyEdges:     p.EarlyOps(),
		},
	}
	out.Memory = p.jsonMemory()
	out.Fused = p.jsonFused()
	out.Split = p.jsonSplit()
	if b := p.Budget; b != nil {
		out.Budget = &jsonBudget{Orderings: b.Orderings, Dependencies: b.Dependencies, UnconstrainedNS: int64(b.Unconstrained)}
	}
	for _, r := range p.Passes {
		out.Passes = append(out.Passes, jsonPass{Name: r.Name, Scope: r.Scope.String(), Runs: r.Runs, TookNS: int64(r.Took), Summary: r.Summary})
	}
	for i, s := range p.Streams {
		out.Streams[i] = jsonStream{ID: s.ID, Name: s.Name, Device: s.Device, Priority: int(s.Priority), Kind: s.Kind.String()}
	}
	for i, st := range p.Steps {
		js := jsonStep{Kind: st.Kind.String(), Stream: st.Stream}
		if st.Op >= 0 {
			js.Op = p.opName(st.Op)
		}
		if st.Kind != Run {
			js.Event = &p.Steps[i].Event
		} else {
			js.Early = p.IsEarly(int(st.Op))
			for _, b := range p.Bodies[int(st.Op)] {
				js.Bodies = append(js.Bodies, b.toJSON())
			}
		}
		out.Steps[i] = js
	}
	for i, src := range p.eventSources() {
		out.Events[i] = jsonEvent{ID: i, Stream: src.stream, AfterOp: p.opName(src.op)}
		if src.op < 0 {
			out.Events[i].AfterOp = ""
		}
	}
	return out
}
