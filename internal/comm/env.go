package comm

import (
	"fmt"
	"net"
	"strconv"
)

// DefaultPort is the TCP port of dagrun's rendezvous when DAGRUN_PORT is
// not set. It is not MASTER_PORT: torchrun's own store listens there.
const DefaultPort = 29511

// Place is where one process stands in a world.
type Place struct {
	Rank, World int
	LocalRank   int    // the rank among the processes of its machine: picks the device
	Launcher    string // "torchrun", "openmpi", "slurm" or "explicit"
	Addr        string // host:port of rank 0's rendezvous
	// Secret authenticates the ranks to each other (SecretEnv); without it
	// anyone who reaches Addr can join.
	Secret Secret
}

// launchers lists the variables each launcher sets, in the order they are
// trusted: torchrun (possibly run by srun or mpirun) first, then Open MPI
// (possibly inside a Slurm allocation), then Slurm.
var launchers = []struct{ name, rank, world, local string }{
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
	{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
	{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
}

// Discover finds this process's place from the variables that torchrun,
// Open MPI or Slurm set (read through getenv, for example os.Getenv). ok is
// false when none of them is set. The rendezvous address is MASTER_ADDR
// (default 127.0.0.1, enough for one machine) at DAGRUN_PORT (default
// DefaultPort).
func Discover(getenv func(string) string) (p Place, ok bool, err error) {
	for _, l := range launchers {
		rs, ws := getenv(l.rank), getenv(l.world)
		if rs == "" && ws == "" {
			continue
		}
		if rs == "" || ws == "" {
			return p, false, fmt.Errorf("%s is set but %s is not: set both (as %s does)", pick(rs != "", l.rank, l.world), pick(rs != "", l.world, l.rank), l.name)
		}
		local := 0
		if ls := getenv(l.local); ls != "" {
			n, err := strconv.Atoi(ls)
			if err != nil || n < 0 {
				return p, false, fmt.Errorf("%s=%q is not a rank", l.local, ls)
			}
			local = n
		}
		rank, err := strconv.Atoi(rs)
		if err != nil {
			return p, false, fmt.Errorf("%s=%q is not a rank", l.rank, rs)
		}
		world, err := strconv.Atoi(ws)
		if err != nil {
			return p, false, fmt.Errorf("%s=%q is not a world size", l.world, ws)
		}
		p, err = Explicit(rank, world, getenv)
		p.Launcher, p.LocalRank = l.name, local
		return p, err == nil, err
	}
	return p, false, nil
}

// Explicit is the place of rank in a world of world ranks given on the
// command line; LocalRank is the rank itself (one machine) and the address
// comes from MASTER_ADDR and DAGRUN_PORT, and the secret from SecretEnv,
// as for Discover.
func Explicit(rank, world int, getenv func(string) string) (Place, error) {
	p := Place{Rank: rank, World: world, LocalRank: rank, Launcher: "explicit"}
	if world < 1 {
		return p, fmt.Errorf("world size %d: a world has at least one rank", world)
	}
	if rank < 0 || rank >= world {
		return p, fmt.Errorf("rank %d is not in a world of %d (ranks are 0 to %d)", rank, world, world-1)
	}
	host := getenv("MASTER_ADDR")
	if host == "" {
		host = "127.0.0.1"
	}
	if len(host) > 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1] // an IPv6 address as URLs write it: [::1]
	}
	port := DefaultPort
	if ps := getenv("DAGRUN_PORT"); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return p, fmt.Errorf("DAGRUN_PORT=%q is not a TCP port (1 to 65535)", ps)
		}
		port = n
	}
	p.Addr = net.JoinHostPort(host, strconv.Itoa(port))
	if s := getenv(SecretEnv); s != "" {
		p.Secret = Secret(s)
	}
	return p, nil
}

func pick(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}
