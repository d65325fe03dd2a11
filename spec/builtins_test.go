package spec

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

var update = flag.Bool("update", false, "rewrite the builtin kernels' part of doc.go and schema.json")

func TestBuiltinKernelsDescribeEveryBuiltin(t *testing.T) {
	docs := BuiltinKernels()
	require.Len(t, docs, len(dag.Builtins()))
	for i, k := range dag.Builtins() {
		d := docs[i]
		assert.Equal(t, k.Name, d.Name)
		assert.NotEmpty(t, d.Doc, "%s has no Doc", k.Name)
		assert.Len(t, d.Params, len(k.Params), k.Name)
		for _, p := range d.Params {
			assert.Equal(t, p.Type == "buffer", p.Mode != "", "%s.%s: buffers and only buffers have a direction", k.Name, p.Name)
		}
	}
	assert.Equal(t, "axpy(y: inout buffer, x: in buffer, alpha: f32)", docs[4].Signature())
}

// replaceBlock replaces the lines of s after from (whole lines) up to the
// first line that starts with to.
func replaceBlock(t *testing.T, s, from, to, with string) string {
	t.Helper()
	i := strings.Index(s, from)
	require.GreaterOrEqual(t, i, 0, "no %q", from)
	i += len(from)
	j := strings.Index(s[i:], to)
	require.GreaterOrEqual(t, j, 0, "no %q after %q", to, from)
	return s[:i] + with + s[i+j:]
}

// The kernel table in doc.go is WriteKernels' (go test -update rewrites it).
func TestDocListsBuiltinKernels(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteKernels(&b, "//\t"))
	data, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	got := string(data)
	want := replaceBlock(t, got, "// where the op's dependencies come from:\n//\n", "//\n", b.String())
	if *update {
		require.NoError(t, os.WriteFile("doc.go", []byte(want), 0o644))
		return
	}
	assert.Equal(t, want, got, "go test ./spec -run TestDocListsBuiltinKernels -update rewrites it")
}

// schemaKernels is schema.json's builtin_kernels definition, one line per
// kernel.
func schemaKernels(t *testing.T) string {
	var b strings.Builder
	b.WriteString("    \"builtin_kernels\": {\n")
	b.WriteString("      \"description\": \"The builtin kernels' args (dagrun kernels lists them): for an editor's help, not referenced\",\n")
	b.WriteString("      \"type\": \"object\",\n      \"properties\": {\n")
	docs := BuiltinKernels()
	for i, d := range docs {
		props := map[string]any{}
		for _, p := range d.Params {
			if p.Mode != "" {
				desc := p.Mode + " buffer"
				if p.DType != "" {
					desc = p.Mode + " " + p.DType + " buffer"
				}
				props[p.Name] = map[string]any{"$ref": "#/$defs/view", "description": desc}
			} else {
				props[p.Name] = map[string]any{"type": "number", "description": p.Type}
			}
		}
		def := map[string]any{"description": d.Signature() + ": " + d.Summary(), "type": "object", "additionalProperties": false, "properties": props}
		line, err := json.Marshal(def)
		require.NoError(t, err)
		sep := ","
		if i == len(docs)-1 {
			sep = ""
		}
		b.WriteString("        \"" + d.Name + "\": " + string(line) + sep + "\n")
	}
	b.WriteString("      }\n    }\n")
	return b.String()
}

// schema.json's builtin_kernels is made from the same table (go test
// -update rewrites it).
func TestSchemaListsBuiltinKernels(t *testing.T) {
	data, err := os.ReadFile("schema.json")
	require.NoError(t, err)
	got := string(data)
	i := strings.Index(got, "    \"builtin_kernels\": {\n")
	require.GreaterOrEqual(t, i, 0, "schema.json has no builtin_kernels")
	j := strings.LastIndex(got, "  }\n}")
	want := got[:i] + schemaKernels(t) + got[j:]
	if *update {
		require.NoError(t, os.WriteFile("schema.json", []byte(want), 0o644))
		return
	}
	assert.Equal(t, want, got, "go test ./spec -run TestSchemaListsBuiltinKernels -update rewrites it")
	var s any
	require.NoError(t, json.Unmarshal(data, &s))
}
