package perf

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dagrun/dagrun/internal/atomicfile"
	"github.com/dagrun/dagrun/internal/human"
)

// Perf-model files: what Save writes and LoadPerfModel accepts. Version 2
// holds the host's costs of untraced runs (version 1's were of runs traced
// op by op, slower by the tracer's cost per op).
const (
	PerfModelFormat  = "dagrun-perf-model"
	PerfModelVersion = 2

	maxPerfModelBytes = 64 << 20 // a file larger than this is refused as corrupt
	// maxMeasured bounds a measured duration: longer ones are refused as
	// clock errors rather than folded into a mean.
	maxMeasured = time.Hour
)

// PerfModelProblem is why a perf-model file was not used.
type PerfModelProblem int

const (
	PerfModelCorrupt     PerfModelProblem = iota // not a perf model, or one with impossible figures
	PerfModelOtherDevice                         // measured on another device
	PerfModelOldVersion                          // written by an older dagrun
	PerfModelNewVersion                          // written by a newer dagrun
)

// PerfModelError says why a perf-model file was not used. LoadPerfModel
// returns it beside an empty model, so that planning goes on with default
// costs; the caller prints it as a warning.
type PerfModelError struct {
	Path    string
	Problem PerfModelProblem
	Detail  string
	Err     error
}

func (e *PerfModelError) Error() string {
	var what, fix string
	switch e.Problem {
	case PerfModelCorrupt:
		what, fix = "is not a valid perf model", "delete it; the next profiled run writes a new one"
	case PerfModelOtherDevice:
		what, fix = "was measured on another device", "pass a model of this device (one file per device)"
	case PerfModelOldVersion:
		what, fix = "was written by an older dagrun", "delete it; the next profiled run writes a new one"
	case PerfModelNewVersion:
		what, fix = "was written by a newer dagrun", "use that dagrun, or another file"
	}
	s := fmt.Sprintf("perf model %s %s", human.Quote(e.Path), what)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s + "; planning with default costs (" + fix + ")"
}

func (e *PerfModelError) Unwrap() error { return e.Err }

// perfModelFile is the JSON form of a PerfModel.
type perfModelFile struct {
	Format    string          `json:"format"`
	Version   int             `json:"version"`
	Device    DeviceKey       `json:"device"`
	Ops       []opFileEntry   `json:"ops"`
	Overheads []overheadEntry `json:"overheads"`
}

type opFileEntry struct {
	Signature string `json:"signature"`
	opEntry
}

type overheadEntry struct {
	Name Overhead `json:"name"`
	PerfStats
}

// LoadPerfModel reads the perf model at path for device dev. A file that
// does not exist gives an empty model and no error. A corrupt file, one of
// another device or of another version gives an empty model and a
// *PerfModelError to print as a warning: planning falls back to fallback's
// costs (DefaultCost when nil).
func LoadPerfModel(path string, dev DeviceKey, fallback CostModel) (*PerfModel, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewPerfModel(dev, fallback), nil
	}
	if err != nil {
		return NewPerfModel(dev, fallback), &PerfModelError{Path: path, Problem: PerfModelCorrupt, Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPerfModelBytes+1))
	if err == nil && len(data) > maxPerfModelBytes {
		err = fmt.Errorf("larger than %d MiB", maxPerfModelBytes>>20)
	}
	if err != nil {
		return NewPerfModel(dev, fallback), &PerfModelError{Path: path, Problem: PerfModelCorrupt, Err: err}
	}
	return parsePerfModel(data, path, dev, fallback)
}

func parsePerfModel(data []byte, path string, dev DeviceKey, fallback CostModel) (*PerfModel, error) {
	fresh := NewPerfModel(dev, fallback)
	fail := func(p PerfModelProblem, detail string, err error) (*PerfModel, error) {
		return fresh, &PerfModelError{Path: path, Problem: p, Detail: detail, Err: err}
	}
	// The header first (json.Unmarshal also refuses anything after the
	// model), so that another version is named as such even where its body
	// would not decode.
	var head struct {
		Format  string    `json:"format"`
		Version int       `json:"version"`
		Device  DeviceKey `json:"device"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fail(PerfModelCorrupt, "", err)
	}
	switch {
	case head.Format != PerfModelFormat:
		return fail(PerfModelCorrupt, fmt.Sprintf("format %q, want %q", head.Format, PerfModelFormat), nil)
	case head.Version < PerfModelVersion:
		return fail(PerfModelOldVersion, fmt.Sprintf("version %d, this dagrun reads %d", head.Version, PerfModelVersion), nil)
	case head.Version > PerfModelVersion:
		return fail(PerfModelNewVersion, fmt.Sprintf("version %d, this dagrun reads %d", head.Version, PerfModelVersion), nil)
	case head.Device != dev:
		return fail(PerfModelOtherDevice, fmt.Sprintf("%s, this is %s", head.Device, dev), nil)
	}
	var file perfModelFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return fail(PerfModelCorrupt, "", err)
	}
	m := NewPerfModel(dev, fallback)
	for i, e := range file.Ops {
		if e.Signature == "" {
			return fail(PerfModelCorrupt, fmt.Sprintf("ops[%d] has no signature", i), nil)
		}
		if _, dup := m.ops[e.Signature]; dup {
			return fail(PerfModelCorrupt, fmt.Sprintf("ops[%d]: signature %q appears twice", i, e.Signature), nil)
		}
		if err := e.check(); err != nil {
			return fail(PerfModelCorrupt, fmt.Sprintf("ops[%d] (%s)", i, human.Quote(e.Signature)), err)
		}
		if e.Bytes < 0 {
			return fail(PerfModelCorrupt, fmt.Sprintf("ops[%d] (%s): bytes %d", i, human.Quote(e.Signature), e.Bytes), nil)
		}
		entry := e.opEntry
		m.ops[e.Signature] = &entry
	}
	for i, o := range file.Overheads {
		if o.Name == "" {
			return fail(PerfModelCorrupt, fmt.Sprintf("overheads[%d] has no name", i), nil)
		}
		if _, dup := m.overheads[o.Name]; dup {
			return fail(PerfModelCorrupt, fmt.Sprintf("overheads[%d]: %q appears twice", i, o.Name), nil)
		}
		if err := o.check(); err != nil {
			return fail(PerfModelCorrupt, fmt.Sprintf("overheads[%d] (%s)", i, human.Quote(string(o.Name))), err)
		}
		s := o.PerfStats
		m.overheads[o.Name] = &s
	}
	m.refit()
	return m, nil
}

// MarshalJSON writes the model in its file format, entries sorted so that
// files diff well.
func (m *PerfModel) MarshalJSON() ([]byte, error) {
	file := perfModelFile{Format: PerfModelFormat, Version: PerfModelVersion, Device: m.Device,
		Ops: []opFileEntry{}, Overheads: []overheadEntry{}}
	for sig, e := range m.ops {
		file.Ops = append(file.Ops, opFileEntry{Signature: sig, opEntry: *e})
	}
	slices.SortFunc(file.Ops, func(a, b opFileEntry) int { return cmp.Compare(a.Signature, b.Signature) })
	for name, s := range m.overheads {
		file.Overheads = append(file.Overheads, overheadEntry{Name: name, PerfStats: *s})
	}
	slices.SortFunc(file.Overheads, func(a, b overheadEntry) int { return cmp.Compare(a.Name, b.Name) })
	return json.MarshalIndent(file, "", "  ")
}

// Save writes the model to path atomically: a temporary file in the same
// folder, synced, then renamed over path, so a reader sees the old model or
// the new one, never half of one.
func (m *PerfModel) Save(path string) error {
	data, err := m.MarshalJSON()
	if err != nil {
		return err
	}
	err = atomicfile.Write(path, func(w io.Writer) error {
		if _, err := w.Write(append(data, '\n')); err != nil {
			return err
		}
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
				return f.Sync() // a reader sees the old model or the new one after a crash too
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("saving perf model: %w", err)
	}
	return nil
}

// RankPath is the perf-model file of rank in a run of several ranks (one
// file each, since each measures its own device): models.json becomes
// models.rank1.json. A negative rank (no ranks) keeps path.
func RankPath(path string, rank int) string {
	if rank < 0 {
		return path
	}
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.rank%d%s", strings.TrimSuffix(path, ext), rank, ext)
}
