package perf

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// Signature is the key under which op's durations are kept: ops with one
// signature are expected to take the same time on one device. Each kind has
// its rule in signatureRules.
func Signature(op *dag.Op) (string, error) { return signature(op, kernelHash) }

func signature(op *dag.Op, hash func(*dag.Kernel) string) (string, error) {
	rule, ok := signatureRules[op.Kind]
	if !ok {
		return "", fmt.Errorf("op %s: no perf-model signature rule for kind %s", op.Name, op.Kind)
	}
	return rule(op, hash)
}

// signature is Signature with kernel hashes kept between calls: hashing a
// kernel's source for every op it launches would dominate planning.
func (m *PerfModel) signature(op *dag.Op) (string, error) {
	sig, err := signature(op, func(k *dag.Kernel) string {
		if h, ok := m.hashes.Load(k); ok {
			return h.(string)
		}
		h := kernelHash(k)
		m.hashes.Store(k, h)
		return h
	})
	if err == nil && m.World > 0 && op.Kind.IsCollective() {
		sig += fmt.Sprintf(" world=%d", m.World)
	}
	return sig, err
}

// kernelHash identifies a kernel's code: its source kind, entry point, file
// and CUDA C source.
func kernelHash(k *dag.Kernel) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%s", k.Source, k.EntryName(), k.Path, k.Code)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// signatureRules, by op kind: what makes two ops of the kind take the same
// time. A new kind adds its rule here (TestSignatureRulesCoverKinds fails
// until it does).
// A rule gets hash, which identifies a kernel's code.
var signatureRules = map[dag.OpKind]func(op *dag.Op, hash func(*dag.Kernel) string) (string, error){
	dag.Alloc: memOpSignature,
	dag.Free:  memOpSignature,
	dag.Copy: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		if len(op.Access) != 2 {
			return "", fmt.Errorf("op %s: a copy needs 2 accesses, has %d", op.Name, len(op.Access))
		}
		return fmt.Sprintf("copy %s %d", copyPath(op.Access[0].Buf, op.Access[1].Buf), op.Bytes()), nil
	},
	dag.Fill: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		if len(op.Access) != 1 {
			return "", fmt.Errorf("op %s: a fill needs 1 access, has %d", op.Name, len(op.Access))
		}
		b := op.Access[0].Buf
		return fmt.Sprintf("fill %s %s %d", b.Placement, b.DType, op.Bytes()), nil
	},
	dag.Launch: launchSignature,
	dag.Host: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		// A host function has no identity but its op's name.
		return fmt.Sprintf("host %q %s", op.Name, accessSizes(op)), nil
	},
	dag.Gemm: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		if op.Gemm == nil || len(op.Access) == 0 {
			return "", fmt.Errorf("op %s: a gemm without its shape", op.Name)
		}
		return fmt.Sprintf("gemm %s %s", op.Gemm, op.Access[0].Buf.DType), nil
	},
	dag.AllReduce:     collectiveSignature,
	dag.AllGather:     collectiveSignature,
	dag.ReduceScatter: collectiveSignature,
	dag.Broadcast:     collectiveSignature,
	dag.Send:          collectiveSignature,
	dag.Recv:          collectiveSignature,
	dag.Task: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		// A task's function has no identity but its op's name.
		return fmt.Sprintf("task %q %s", op.Name, accessSizes(op)), nil
	},
	dag.Memset2D: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		if op.Memset2D == nil || len(op.Access) != 1 {
			return "", fmt.Errorf("op %s: a memset2d without its region", op.Name)
		}
		m, b := op.Memset2D, op.Access[0].Buf
		return fmt.Sprintf("memset2d %s %s %dx%d pitch %d", b.Placement, b.DType, m.Rows, m.Width, m.Pitch), nil
	},
	dag.While: controlSignature,
	dag.If:    controlSignature,
}

// controlSignature: a loop's or branch's time is its iterations or its
// branch taken, which nothing but its name tells apart, and the bytes its
// body touches. The planner costs a control op from its body's plan
// (Plan.Bodies); what the model keeps of one is its span as measured.
func controlSignature(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
	return fmt.Sprintf("%s %q %s", op.Kind, op.Name, accessSizes(op)), nil
}

// collectiveSignature: the kind, the bytes each rank moves and the dtype
// (a model that knows its world adds the world size: PerfModel.World).
func collectiveSignature(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
	if len(op.Access) == 0 {
		return "", fmt.Errorf("op %s: a collective without a view", op.Name)
	}
	return fmt.Sprintf("%s %s %s", op.Kind, op.Access[0].Buf.DType, accessSizes(op)), nil
}

func memOpSignature(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
	if len(op.Access) != 1 {
		return "", fmt.Errorf("op %s: an %s needs 1 access, has %d", op.Name, op.Kind, len(op.Access))
	}
	return fmt.Sprintf("%s %s %d", op.Kind, op.Access[0].Buf.Placement, op.Bytes()), nil
}

// launchSignature: the kernel (name, entry and a hash of its source or
// file), the launch shape, the scalar arguments (spin(10) is not spin(50))
// and the sizes of the buffers it touches.
func launchSignature(op *dag.Op, hash func(*dag.Kernel) string) (string, error) {
	l := op.Launch
	if l == nil || l.Kernel == nil {
		return "", fmt.Errorf("op %s: a launch without a kernel", op.Name)
	}
	b := make([]byte, 0, 128)
	b = append(b, "launch "...)
	b = append(b, l.Kernel.Name...)
	b = append(b, " src="...)
	b = append(b, hash(l.Kernel)...)
	b = appendDim(append(b, " grid="...), l.Grid)
	b = appendDim(append(b, " block="...), l.Block)
	b = strconv.AppendInt(append(b, " shared="...), int64(l.Shared), 10)
	b = append(b, " args="...)
	for i, a := range l.Args {
		if i > 0 {
			b = append(b, ',')
		}
		if a.Access >= 0 {
			b = append(b, "buf"...)
			continue
		}
		b = strconv.AppendInt(b, a.Int, 10)
		b = append(b, '/')
		b = strconv.AppendFloat(b, a.Float, 'g', -1, 64)
	}
	b = append(b, " bytes="...)
	for i, a := range op.Access {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, a.Size, 10)
	}
	return string(b), nil
}

func appendDim(b []byte, d dag.Dim3) []byte {
	b = strconv.AppendInt(b, int64(d.X), 10)
	b = strconv.AppendInt(append(b, 'x'), int64(d.Y), 10)
	return strconv.AppendInt(append(b, 'x'), int64(d.Z), 10)
}

func accessSizes(op *dag.Op) string {
	s := make([]string, len(op.Access))
	for i, a := range op.Access {
		s[i] = strconv.FormatInt(a.Size, 10)
	}
	return strings.Join(s, ",")
}

// copyPath names the path of a copy from src to dst: d2d (one device),
// p2p (two), h2d and d2h with the host side's kind (pinned or pageable),
// and h2h.
func copyPath(src, dst *dag.Buffer) string {
	srcDev, dstDev := src.Placement == dag.Device, dst.Placement == dag.Device
	switch {
	case srcDev && dstDev && src.Device == dst.Device:
		return "d2d"
	case srcDev && dstDev:
		return "p2p"
	case srcDev:
		return "d2h-" + dst.Placement.String()
	case dstDev:
		return "h2d-" + src.Placement.String()
	}
	return "h2h"
}
