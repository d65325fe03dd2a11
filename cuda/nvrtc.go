package cuda

/*
#include <stdlib.h>
#include "cuda.h"

static const char* w_nvrtc_error(dr_nvrtc* n, nvrtcResult r) { return n->nvrtcGetErrorString(r); }
static nvrtcResult w_nvrtc_version(dr_nvrtc* n, int* major, int* minor) { return n->nvrtcVersion(major, minor); }
*/
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"
)

// nvrtcInvalidOption is NVRTC_ERROR_INVALID_OPTION: among others, an
// architecture this NVRTC does not know.
const nvrtcInvalidOption = 5

// nvrtcCandidates lists where libnvrtc is looked for, in order: DAGRUN_NVRTC
// (a library file, or a folder holding one), the dynamic loader's search
// (ldconfig, LD_LIBRARY_PATH), the CUDA toolkit, and NVIDIA's pip packages.
func nvrtcCandidates(env string) []string {
	return libraryCandidates(env, []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, cudaLib,
		torchWheel+"cu13/lib", torchWheel+"cuda_nvrtc/lib", distWheel+"cu13/lib", distWheel+"cuda_nvrtc/lib")
}

// nvrtc is a loaded NVRTC library.
type nvrtc struct {
	lib          *C.dr_nvrtc
	path         string
	major, minor int
}

func openNVRTC(candidates []string) (*nvrtc, error) {
	lib := (*C.dr_nvrtc)(C.calloc(1, C.sizeof_dr_nvrtc))
	if lib == nil {
		return nil, fmt.Errorf("%w: out of memory", ErrNoNVRTC)
	}
	p, msg := loadFirst(candidates, func(path string, why **C.char) C.int {
		return withCString(path, func(cp *C.char) C.int { return C.dr_nvrtc_load(lib, cp, why) })
	})
	if p != "" {
		n := &nvrtc{lib: lib, path: p}
		var major, minor C.int
		if r := C.w_nvrtc_version(lib, &major, &minor); r != 0 {
			err := n.err("nvrtcVersion", r, "")
			n.close()
			return nil, fmt.Errorf("%w: %s: %w", ErrNoNVRTC, p, err)
		}
		n.major, n.minor = int(major), int(minor)
		return n, nil
	}
	C.free(unsafe.Pointer(lib))
	return nil, fmt.Errorf("%w: %s (install the CUDA toolkit or the nvidia-cuda-nvrtc pip package, or set DAGRUN_NVRTC to libnvrtc's path)",
		ErrNoNVRTC, msg)
}

func (n *nvrtc) close() {
	if n.lib != nil {
		C.dr_nvrtc_unload(n.lib)
		C.free(unsafe.Pointer(n.lib))
		n.lib = nil
	}
}

func (n *nvrtc) err(call string, r C.nvrtcResult, log string) error {
	e := &NVRTCError{Call: call, Code: int(r), Log: log}
	if s := C.w_nvrtc_error(n.lib, r); s != nil {
		e.Msg = C.GoString(s)
	}
	return e
}

// compile compiles CUDA C src for arch with the given options, to a cubin
// when cubin is set, else to PTX.
func (n *nvrtc) compile(src, name string, opts []string, cubin bool) ([]byte, error) {
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	copts := make([]*C.char, len(opts)+1) // never empty, so &copts[0] is valid
	for i, o := range opts {
		copts[i] = C.CString(o)
	}
	defer func() {
		for _, p := range copts {
			C.free(unsafe.Pointer(p))
		}
	}()
	// copts is Go memory holding C pointers only, so C may read it during the call.
	var out, log *C.char
	var outlen C.size_t
	var step *C.char
	want := C.int(0)
	if cubin {
		want = 1
	}
	r := C.dr_nvrtc_compile(n.lib, csrc, cname, C.int(len(opts)), &copts[0], want, &out, &outlen, &log, &step)
	defer C.free(unsafe.Pointer(out))
	defer C.free(unsafe.Pointer(log))
	if r != 0 {
		return nil, n.err(C.GoString(step), r, strings.TrimSpace(C.GoString(log)))
	}
	return C.GoBytes(unsafe.Pointer(out), C.int(outlen)), nil
}

// compiler compiles CUDA C with NVRTC, loaded on first use, and keeps the
// results in a folder keyed by a hash of everything that shapes them.
type compiler struct {
	candidates []string
	cacheDir   string // "" disables the cache
	nv         *nvrtc
}

// image is compiled device code ready for cuModuleLoadData.
type image struct {
	data  []byte
	cubin bool
}

// compile returns src compiled for compute capability major.minor.
func (c *compiler) compile(src, name string, major, minor int) (image, error) {
	sm := fmt.Sprintf("sm_%d%d", major, minor)
	opts := []string{"--gpu-architecture=" + sm, "--std=c++17"}
	key := cacheKey(src, opts)
	if img, ok := c.cached(key); ok {
		return img, nil
	}
	if c.nv == nil {
		nv, err := openNVRTC(c.candidates)
		if err != nil {
			return image{}, err
		}
		c.nv = nv
	}
	data, err := c.nv.compile(src, name, opts, true)
	cubin := true
	var ne *NVRTCError
	if errors.As(err, &ne) && ne.Code == nvrtcInvalidOption {
		// This NVRTC predates the device: compile PTX for the newest
		// architecture it knows and let the driver finish the job.
		opts[0] = "--gpu-architecture=compute_" + sm[3:]
		data, err = c.nv.compile(src, name, opts, false)
		cubin = false
	}
	if err != nil {
		return image{}, fmt.Errorf("compiling %s for %s with NVRTC %d.%d (%s): %w", name, sm, c.nv.major, c.nv.minor, c.nv.path, err)
	}
	img := image{data: data, cubin: cubin}
	c.store(key, img)
	return img, nil
}

// compilePTX returns src compiled to PTX for compute capability
// major.minor, for the driver to finish: what the kernels that set
// conditional nodes fall back to where NVRTC will not make a cubin of them.
func (c *compiler) compilePTX(src, name string, major, minor int) ([]byte, error) {
	opts := []string{fmt.Sprintf("--gpu-architecture=compute_%d%d", major, minor), "--std=c++17"}
	if c.nv == nil {
		nv, err := openNVRTC(c.candidates)
		if err != nil {
			return nil, err
		}
		c.nv = nv
	}
	return c.nv.compile(src, name, opts, false)
}

func (c *compiler) close() {
	if c.nv != nil {
		c.nv.close()
		c.nv = nil
	}
}

// cacheKey is the file name of a compilation's result: the hash of the
// source, the options (architecture included) and dagrun's cache format.
func cacheKey(src string, opts []string) string {
	h := sha256.New()
	h.Write([]byte("dagrun-nvrtc-1\x00"))
	h.Write([]byte(src))
	for _, o := range opts {
		h.Write([]byte{0})
		h.Write([]byte(o))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (c *compiler) cached(key string) (image, bool) {
	if c.cacheDir == "" {
		return image{}, false
	}
	for _, ext := range []string{".cubin", ".ptx"} {
		if data, err := os.ReadFile(filepath.Join(c.cacheDir, key+ext)); err == nil && len(data) > 0 {
			return image{data: data, cubin: ext == ".cubin"}, true
		}
	}
	return image{}, false
}

// store writes img to the cache; a cache that cannot be written only costs
// a compilation next time, so its errors are dropped.
func (c *compiler) store(key string, img image) {
	if c.cacheDir == "" || os.MkdirAll(c.cacheDir, 0o755) != nil {
		return
	}
	ext := ".ptx"
	if img.cubin {
		ext = ".cubin"
	}
	f, err := os.CreateTemp(c.cacheDir, key+".tmp*")
	if err != nil {
		return
	}
	_, werr := f.Write(img.data)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), filepath.Join(c.cacheDir, key+ext)) != nil {
		os.Remove(f.Name())
	}
}

// defaultCacheDir is where compiled kernels are kept: the user's cache
// folder, or none when the system names none.
func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "dagrun", "nvrtc")
}

// readKernelFile reads a PTX, cubin or fatbin file for cuModuleLoadData.
func readKernelFile(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("no file named: a PTX or cubin kernel needs its file's path")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return data, nil
}
