package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("schema.json")
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal(data, &s))
	return s
}

func keysOf(t *testing.T, schema map[string]any, def string) []string {
	t.Helper()
	node := schema
	if def != "" {
		node = schema["$defs"].(map[string]any)[def].(map[string]any)
	}
	props, ok := node["properties"].(map[string]any)
	require.True(t, ok, "%s has no properties", def)
	var keys []string
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func enumOf(t *testing.T, schema map[string]any, def string) []string {
	t.Helper()
	node := schema["$defs"].(map[string]any)[def].(map[string]any)
	if one, ok := node["oneOf"].([]any); ok {
		node = one[0].(map[string]any)
	}
	var out []string
	for _, v := range node["enum"].([]any) {
		out = append(out, v.(string))
	}
	return out
}

func sorted(list []string) []string {
	out := slices.Clone(list)
	sort.Strings(out)
	return out
}

// The schema lists exactly the keys and values the loader accepts.
func TestSchemaMatchesLoader(t *testing.T) {
	s := loadSchema(t)
	assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", s["$schema"])
	objects := map[string][]string{
		"":                  topKeys,
		"run":               runKeys,
		"buffer_properties": bufferKeys,
		"init_properties":   initKeys,
		"kernel":            kernelKeys,
		"param":             paramKeys,
		"view_properties":   viewKeys,
		"output_properties": outputKeys,
		"copy":              copyKeys,
		"fill":              fillKeys,
		"memset2d":          memset2DKeys,
		"gemm":              gemmKeys,
		"random_properties": randomKeys,
	}
	for kind, keys := range collectiveKeys {
		objects[kind] = keys
	}
	for _, kind := range opKindKeys {
		if kind != "host" {
			objects[kind+"_op"] = opKeys(kind, "")
		}
	}
	for _, step := range hostSteps {
		def := "host_" + step + "_op"
		objects[def] = opKeys("host", step)
		host := s["$defs"].(map[string]any)[def].(map[string]any)["properties"].(map[string]any)["host"]
		assert.Equal(t, map[string]any{"const": step}, host, def)
	}
	for def, keys := range objects {
		assert.Equal(t, sorted(keys), keysOf(t, s, def), "properties of %q", def)
	}
	enums := map[string][]string{
		"backend":    slices.Clone(backends),
		"placement":  placements,
		"dtype":      dtypes,
		"mode":       modes,
		"param_type": paramTypes,
		"priority":   priorities,
		"init":       initStrings,
		"reduction":  reductions,
		"epilogue":   epilogues,
	}
	for alias := range backendAliases {
		enums["backend"] = append(enums["backend"], alias)
	}
	slices.Sort(enums["backend"][len(backends):])
	for def, values := range enums {
		assert.Equal(t, values, enumOf(t, s, def), "enum of %q", def)
	}
	// Every op definition is one alternative of op.
	var refs []string
	for _, alt := range s["$defs"].(map[string]any)["op"].(map[string]any)["oneOf"].([]any) {
		refs = append(refs, strings.TrimPrefix(alt.(map[string]any)["$ref"].(string), "#/$defs/"))
	}
	var want []string
	for def := range objects {
		if strings.HasSuffix(def, "_op") {
			want = append(want, def)
		}
	}
	assert.ElementsMatch(t, want, refs)
}

// Every example validates against the schema, and a few broken specs do not.
func TestSchemaValidatesExamples(t *testing.T) {
	s := loadSchema(t)
	files, err := filepath.Glob("../examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			var doc any
			require.NoError(t, yaml.Unmarshal(src, &doc))
			assert.NoError(t, validate(s, s, doc, "$"))
		})
	}
	for _, bad := range []string{
		"ops: []",
		"buffers: {x: {size: 4 XB}}\nops: [{alloc: x}]",
		"ops: [{launch: scale, lanch: 1}]",
		"ops: [{copy: {from: a}}]",
		"run: {streams: 40}\nops: [{free: x}]",
		"ops: [{host: checksum}]",
		"ops: [{fill: {buffer: x, value: 1}, alloc: x}]",
		"ops: [{gemm: {a: a, b: b, c: c, m: 1, n: 1}}]",
		"ops: [{gemm: {a: a, b: b, c: c, m: 1, n: 1, k: 1, transa: true}}]",
		"ops: [{all_reduce: {view: g, op: mean}}]",
		"ops: [{broadcast: {view: g}}]",
		"run: {world: 0}\nops: [{send: {view: g, to: 1}}]",
		"buffers: {x: {size: 4, init: {random: {per_rank: true}}}}\nops: [{recv: {view: x, from: 0}}]",
	} {
		var doc any
		require.NoError(t, yaml.Unmarshal([]byte(bad), &doc))
		assert.Error(t, validate(s, s, doc, "$"), bad)
	}
}

// validate checks v against the subset of JSON Schema 2020-12 that
// schema.json uses.
func validate(root, schema map[string]any, v any, path string) error {
	if ref, ok := schema["$ref"].(string); ok {
		def := root["$defs"].(map[string]any)[strings.TrimPrefix(ref, "#/$defs/")]
		if def == nil {
			return fmt.Errorf("%s: unknown $ref %s", path, ref)
		}
		return validate(root, def.(map[string]any), v, path)
	}
	if typ, ok := schema["type"].(string); ok && !hasType(v, typ) {
		return fmt.Errorf("%s: %v is not of type %s", path, v, typ)
	}
	if c, ok := schema["const"]; ok && !sameValue(c, v) {
		return fmt.Errorf("%s: %v is not %v", path, v, c)
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return sameValue(e, v) }) {
		return fmt.Errorf("%s: %v is not one of %v", path, v, enum)
	}
	if alts, ok := schema["oneOf"].([]any); ok {
		var matched int
		var errs []string
		for _, a := range alts {
			if err := validate(root, a.(map[string]any), v, path); err != nil {
				errs = append(errs, err.Error())
			} else {
				matched++
			}
		}
		if matched != 1 {
			return fmt.Errorf("%s: matches %d alternatives, want 1: %s", path, matched, strings.Join(errs, "; "))
		}
	}
	if n, ok := number(v); ok {
		if m, ok := schema["minimum"].(float64); ok && n < m {
			return fmt.Errorf("%s: %v < %v", path, n, m)
		}
		if m, ok := schema["maximum"].(float64); ok && n > m {
			return fmt.Errorf("%s: %v > %v", path, n, m)
		}
	}
	if str, ok := v.(string); ok {
		if p, ok := schema["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", path, str, p)
		}
		if m, ok := schema["minLength"].(float64); ok && float64(len(str)) < m {
			return fmt.Errorf("%s: %q is too short", path, str)
		}
	}
	if list, ok := v.([]any); ok {
		if m, ok := schema["minItems"].(float64); ok && float64(len(list)) < m {
			return fmt.Errorf("%s: %d items, want at least %v", path, len(list), m)
		}
		if m, ok := schema["maxItems"].(float64); ok && float64(len(list)) > m {
			return fmt.Errorf("%s: %d items, want at most %v", path, len(list), m)
		}
		if items, ok := schema["items"].(map[string]any); ok {
			for i, it := range list {
				if err := validate(root, items, it, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		return validateObject(root, schema, obj, path)
	}
	return nil
}

func validateObject(root, schema map[string]any, obj map[string]any, path string) error {
	for _, r := range asList(schema["required"]) {
		if _, ok := obj[r.(string)]; !ok {
			return fmt.Errorf("%s: missing %s", path, r)
		}
	}
	if m, ok := schema["minProperties"].(float64); ok && float64(len(obj)) < m {
		return fmt.Errorf("%s: %d properties, want at least %v", path, len(obj), m)
	}
	if m, ok := schema["maxProperties"].(float64); ok && float64(len(obj)) > m {
		return fmt.Errorf("%s: %d properties, want at most %v", path, len(obj), m)
	}
	props, _ := schema["properties"].(map[string]any)
	for k, val := range obj {
		if names, ok := schema["propertyNames"].(map[string]any); ok {
			if err := validate(root, names, k, path+"."+k); err != nil {
				return err
			}
		}
		if p, ok := props[k]; ok {
			if err := validate(root, p.(map[string]any), val, path+"."+k); err != nil {
				return err
			}
			continue
		}
		switch extra := schema["additionalProperties"].(type) {
		case bool:
			if !extra {
				return fmt.Errorf("%s: unknown property %s", path, k)
			}
		case map[string]any:
			if err := validate(root, extra, val, path+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func hasType(v any, typ string) bool {
	switch typ {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := number(v)
		return ok
	case "integer":
		n, ok := number(v)
		if _, isFloat := v.(float64); isFloat {
			return ok && n == math.Trunc(n)
		}
		return ok
	}
	return false
}

func sameValue(a, b any) bool {
	x, okX := number(a)
	y, okY := number(b)
	if okX && okY {
		return x == y
	}
	return a == b
}
