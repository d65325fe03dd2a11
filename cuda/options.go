package cuda

import (
	"fmt"
	"strconv"

	"github.com/dagrun/dagrun/dag"
)

// Option configures a Backend.
type Option func(*config)

type config struct {
	libcuda  string // DAGRUN_LIBCUDA or LibCUDA
	nvrtc    string // DAGRUN_NVRTC or NVRTC
	cublasLt []string
	cacheDir string
	noPeer   bool   // NoPeer (peer_session.go)
	libnccl  string // LibNCCL (peer_session.go)
	nccl     NCCLResources
	copyColl bool // CopyCollectives (copycoll.go)
	// initOnHost makes every device buffer's initial contents on the host
	// and uploads them, as before the device made them (initdev.go): for
	// benchmarks that compare the two.
	initOnHost bool
}

// initContentsOnHost is the option that sets config.initOnHost.
func initContentsOnHost() Option { return func(c *config) { c.initOnHost = true } }

// LibCUDA loads the driver from path before the usual places.
func LibCUDA(path string) Option { return func(c *config) { c.libcuda = path } }

// NVRTC loads NVRTC from path (a library file or a folder holding one)
// before the usual places.
func NVRTC(path string) Option { return func(c *config) { c.nvrtc = path } }

// CuBLASLt loads cuBLASLt from path only (a library file), not from the
// usual places; DAGRUN_CUBLASLT puts a path before them instead.
func CuBLASLt(path string) Option { return func(c *config) { c.cublasLt = []string{path} } }

// CacheDir keeps compiled kernels in dir; "" turns the cache off. The
// default is the "dagrun/nvrtc" folder of os.UserCacheDir.
func CacheDir(dir string) Option { return func(c *config) { c.cacheDir = dir } }

// StreamPriority maps a dag priority onto a device's stream priority range,
// where least is the numerically largest (lowest) priority and greatest the
// numerically smallest: dag.Low gets least, each step up one more, clamped
// to greatest. On an H100 (least 0, greatest -5) Low is 0, Normal -1 and
// High -2.
func StreamPriority(p dag.Priority, least, greatest int) int {
	const span = 1 << 16 // far beyond any device's range; keeps the arithmetic from overflowing
	steps := int64(p) - int64(dag.Low)
	steps = max(min(steps, span), -span)
	v := int64(least) - steps
	return int(max(min(v, int64(least)), int64(greatest)))
}

// NoPeer makes the backend leave peer access off and copy between devices
// through pinned host memory (a device-to-host copy, then a host-to-device
// copy, on the op's stream), so that path can be tested on machines whose
// devices are joined by NVLink (the CLI's --no-peer). Topology then reports
// no pair with peer access.
func NoPeer() Option { return func(c *config) { c.noPeer = true } }

// LibNCCL loads NCCL from path only (a library file, or a folder holding
// libnccl.so.2), not from the usual places; DAGRUN_LIBNCCL puts a path
// before them instead.
func LibNCCL(path string) Option { return func(c *config) { c.libnccl = path } }

// NCCL sets the resources of the communicators that sessions of the
// backend join (NCCLResources): for example MaxCTAs, so that a collective
// beside a GEMM takes fewer of its SMs. Join fails, naming the library,
// where the NCCL found is older than 2.17.
func NCCL(r NCCLResources) Option { return func(c *config) { c.nccl = r } }

// CopyCollectives makes a sum all-reduce of a persistent buffer between
// ranks of one process, whose devices reach each other's memory, run on
// the copy engines (peer copies ordered by flags, and an add kernel)
// instead of NCCL's kernels, so that it takes almost no SMs from the
// GEMMs beside it. Other collectives, and ranks in other processes, stay
// NCCL's.
//
// A rank's stream then waits for its peers' in the device's front end,
// which blocks every stream that shares its hardware queue: with the
// driver's default of 8 queues, a replay of a block split in 4 deadlocked
// on an H200 (a GEMM a peer waited for sat behind a wait for that peer).
// So New refuses the option unless CUDA_DEVICE_MAX_CONNECTIONS is 32 (its
// most) in the environment, where it must be set before the process makes
// its first CUDA context. DAGRUN_COPY_COLLECTIVES=1 in the environment
// sets it for every backend the process makes (dagrun run's).
func CopyCollectives() Option { return func(c *config) { c.copyColl = true } }

// maxConnectionsVar is the driver's variable for the number of hardware
// queues per device (CopyCollectives).
const maxConnectionsVar = "CUDA_DEVICE_MAX_CONNECTIONS"

// copyConnections reports why CopyCollectives cannot run with the
// variable's value v, if it cannot.
func copyConnections(v string) error {
	if n, err := strconv.Atoi(v); err == nil && n >= 32 {
		return nil
	}
	return fmt.Errorf("cuda: CopyCollectives needs %s=32 in the environment before the process's first CUDA call (it is %q): with fewer hardware queues, a stream waiting for a peer can block the work that peer waits for",
		maxConnectionsVar, v)
}

// NCCLResources bounds what a communicator takes from the device
// (ncclConfig_t's fields of the same names): fewer CTAs leave more of the
// SMs to the kernels that run beside a collective, at some cost to the
// collective's own speed. Zero leaves a field at NCCL's default (or its
// NCCL_MIN_CTAS, NCCL_MAX_CTAS and NCCL_CGA_CLUSTER_SIZE variables).
type NCCLResources struct {
	MinCTAs, MaxCTAs, CGAClusterSize int
}

func (r NCCLResources) isZero() bool { return r == NCCLResources{} }
