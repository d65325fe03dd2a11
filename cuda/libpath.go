package cuda

import (
	"os"
	"path/filepath"
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
