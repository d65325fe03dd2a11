package cuda

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"
)

// Folders where CUDA's libraries live besides the loader's own path: the
// toolkit, and the pip wheels of NVIDIA's packages (PyTorch's virtual
// environment on the GPU machines, and the system's dist-packages).
const (
	cudaLib    = "/usr/local/cuda/lib64"
	torchWheel = "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/"
	distWheel  = "/usr/local/lib/python3.12/dist-packages/nvidia/"
)

// libraryCandidates lists where to look for a library called one of names,
// in order: env (a library file, or a folder holding one of names), the
// loader's own search (the bare names), then each of dirs. The first that
// opens is used; errors name every candidate tried.
func libraryCandidates(env string, names []string, dirs ...string) []string {
	var c []string
	if env != "" {
		if st, err := os.Stat(env); err == nil && st.IsDir() {
			for _, n := range names {
				c = append(c, filepath.Join(env, n))
			}
		} else {
			c = append(c, env)
		}
	}
	c = append(c, names...)
	for _, dir := range dirs {
		for _, n := range names {
			c = append(c, filepath.Join(dir, n))
		}
	}
	return c
}

// loadFirst tries candidates in order with load, which returns 0 when the
// library at path loaded, 1 when it opened but lacks an entry point (why
// names it), and anything else when it did not open (why says so). It
// returns the path that loaded, or "" and why none did: what each
// candidate that exists lacked, else that none opens.
func loadFirst(candidates []string, load func(path string, why **C.char) C.int) (string, string) {
	var tried []string
	for _, p := range candidates {
		var why *C.char
		switch load(p, &why) {
		case 0:
			return p, ""
		case 1:
			tried = append(tried, fmt.Sprintf("%s lacks %s", p, C.GoString(why)))
		default:
			if s := C.GoString(why); !strings.Contains(s, "No such file") {
				tried = append(tried, s)
			}
		}
	}
	if len(tried) > 0 {
		return "", strings.Join(tried, "; ")
	}
	return "", "none of " + strings.Join(candidates, ", ") + " opens"
}

// withCString calls f with path as a C string.
func withCString(path string, f func(*C.char) C.int) C.int {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	return f(cp)
}
