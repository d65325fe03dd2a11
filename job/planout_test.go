package job

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/spec"
)

// A plan's JSON carries the schema version, whose its times are and the
// CPU backend's estimate, and with a perf model the model's coverage; its
// text says whose the times are; its comparison has a row per strategy.
func TestWritePlan(t *testing.T) {
	s, err := spec.Load(filepath.Join("..", "examples", "fan_out.yaml"))
	require.NoError(t, err)
	p, err := Plan(s, Layout{}.PlanOptions(s)...)
	require.NoError(t, err)

	var out bytes.Buffer
	require.NoError(t, WritePlan(&out, p, nil, "json"))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	assert.EqualValues(t, SchemaVersion, doc["schema_version"])
	assert.Equal(t, "default cost model (H100-class GPU)", doc["times"])
	assert.Contains(t, doc, "cpu_backend_estimate_ns")
	assert.NotContains(t, doc, "perf_model")
	assert.Contains(t, doc, "steps")

	b := cpu.New()
	defer b.Close()
	model := load(t, b)
	model.Planned(p)
	out.Reset()
	require.NoError(t, WritePlan(&out, p, model, "json"))
	doc = nil
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	assert.Equal(t, "perf model", doc["times"])
	assert.Contains(t, doc, "perf_model")

	out.Reset()
	require.NoError(t, WritePlan(&out, p, nil, "text"))
	assert.Contains(t, out.String(), "times               the default cost model's")
	out.Reset()
	require.NoError(t, WritePlan(&out, p, model, "text"))
	assert.Contains(t, out.String(), "ops costed from measurements")
	out.Reset()
	require.NoError(t, WritePlan(&out, p, nil, "dot"))
	assert.Contains(t, out.String(), "digraph")

	out.Reset()
	require.NoError(t, WriteComparison(&out, s, Layout{}))
	assert.Regexp(t, `(?m)^strategy +eager estimate +replay estimate +waits +streams +placed by\nlist `, out.String())
}
