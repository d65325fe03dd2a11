package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/profile"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

// SchemaVersion is the version of every JSON document dagrun writes (run
// reports, plans, validation results, errors, trace metadata): it grows
// when a field changes meaning or goes away, not when one is added.
const SchemaVersion = 1

// WritePlan writes plan p as dagrun plan prints it, in format "text" (each
// stream's steps, the figures, the passes and whose the times are), "json"
// (the planner's JSON with a schema_version, whose the times are, the CPU
// backend's estimate of a run and the perf model's coverage) or "dot".
// model is the perf model p was planned with; nil for the default costs.
func WritePlan(w io.Writer, p *planner.Plan, model *profile.Learner, format string) error {
	switch format {
	case "json":
		return writePlanJSON(w, p, model)
	case "dot":
		return trace.PlanDOT(w, p)
	}
	if err := p.WriteText(w); err != nil {
		return err
	}
	if err := p.WritePasses(w); err != nil {
		return err
	}
	if model != nil {
		_, err := fmt.Fprintln(w, model.Coverage())
		return err
	}
	return writeTimes(w, p)
}

func writePlanJSON(w io.Writer, p *planner.Plan, model *profile.Learner) error {
	data, err := p.MarshalJSON()
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	if _, ok := fields["schema_version"]; !ok {
		fields["schema_version"] = json.RawMessage(fmt.Sprint(SchemaVersion))
	}
	src := "default cost model (H100-class GPU)"
	if model != nil {
		src = "perf model"
		fields["perf_model"], _ = json.Marshal(profile.Update{Path: model.Path, Measured: model.Covered, Ops: model.Ops})
	}
	fields["times"], _ = json.Marshal(src)
	fields["cpu_backend_estimate_ns"], _ = json.Marshal(int64(profile.EstimateCPU(p.Graph).Time))
	if data, err = json.Marshal(fields); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err = b.WriteTo(w)
	return err
}

// writeTimes says whose the plan's times are, planned without a perf
// model: the default cost model's, an H100-class GPU's, not a measure of
// this machine. Where the CPU backend would take longer than LongOnCPU, it
// says about how long, so that a plan read on a machine without a GPU
// does not promise a GPU's milliseconds.
func writeTimes(w io.Writer, p *planner.Plan) error {
	if _, err := fmt.Fprintln(w, "times               the default cost model's, for an H100-class GPU, not measured here (--perf-model FILE plans with measured times)"); err != nil {
		return err
	}
	e := profile.EstimateCPU(p.Graph)
	if e.Time <= LongOnCPU {
		return nil
	}
	_, err := fmt.Fprintf(w, "on the cpu backend  about %s a run, estimated from %s of GEMMs and %s moved (%s)\n",
		human.Duration(e.Time.Round(time.Second)), human.Flops(e.Flops), human.Bytes(e.Bytes), e.Rates())
	return err
}

// WriteComparison plans s with l and every placement strategy and writes
// a table of each one's estimated makespan, for an eager run (what the
// plan is made for) and for a graph replay of the same plan, its waits and
// streams (dagrun plan --compare).
func WriteComparison(w io.Writer, s *spec.Spec, l Layout) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "strategy\teager estimate\treplay estimate\twaits\tstreams\tplaced by")
	for _, strategy := range planner.Strategies() {
		p, err := Plan(s, append(l.PlanOptions(s), planner.OrderBy(strategy))...)
		if err != nil {
			return err
		}
		replay := perf.Simulate(p, nil, planner.Replay)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", strategy, human.Duration(p.Stats.Makespan), human.Duration(replay.Makespan), p.Stats.Waits, p.Stats.Streams, p.Stats.Strategy)
	}
	return tw.Flush()
}
