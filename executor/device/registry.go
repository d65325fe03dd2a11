package device

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Config is what the command line or a program asks of whichever backend it
// opens; a backend reads the settings that apply to it and ignores the rest.
type Config struct {
	// NoPeer copies between devices through host memory instead of
	// directly, where the backend has peer copies at all.
	NoPeer bool
}

// Opener makes a Backend from cfg. It returns an error matching
// ErrNoDevice when the machine has nothing for this backend to run on.
type Opener func(cfg Config) (Backend, error)

// ErrNoDevice is matched (through errors.Is) by an Opener's error when the
// machine lacks what the backend needs (a driver, a device); "auto" then
// tries the next backend.
var ErrNoDevice = errors.New("no device for this backend")

// ErrUnknownBackend is matched by Open's error for a name nobody registered.
var ErrUnknownBackend = errors.New("unknown backend")

// Auto is the name Open takes for "the most preferred backend that opens".
const Auto = "auto"

type registration struct {
	name string
	open Opener
	auto int // preference under Auto: higher first; 0 never
}

// registry is the table of backends, filled by the backends' init
// functions (as database/sql's drivers fill theirs) and read by Open.
var registry struct {
	sync.Mutex
	byName map[string]registration
}

// Register makes a backend available to Open under name. auto is its
// preference when the name asked for is "auto": the registered backend with
// the highest auto that opens is chosen, and 0 keeps a backend out of auto
// (a test double). It panics when name is empty, "auto", or taken, since
// that is a mistake in a program's imports, not in its input.
func Register(name string, auto int, open Opener) {
	registry.Lock()
	defer registry.Unlock()
	if name == "" || name == Auto || open == nil {
		panic(fmt.Sprintf("device: Register(%q): a backend needs a name other than %q and an Opener", name, Auto))
	}
	if _, dup := registry.byName[name]; dup {
		panic(fmt.Sprintf("device: Register called twice for backend %q", name))
	}
	if registry.byName == nil {
		registry.byName = map[string]registration{}
	}
	registry.byName[name] = registration{name: name, open: open, auto: auto}
}

// Backends returns the names of the registered backends, sorted.
func Backends() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, 0, len(registry.byName))
	for n := range registry.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Opened is a backend that Open made, with the name it was registered
// under and, where "auto" passed over a preferred backend, why.
type Opened struct {
	Backend Backend
	Name    string
	// Fallback is the error of each more preferred backend that did not
	// open under "auto", joined; empty when the first choice opened.
	Fallback string
}

// Open opens the backend registered as name, or under "auto" the most
// preferred registered backend that opens: a backend whose Opener fails
// with an error matching ErrNoDevice is passed over, any other error is
// returned. The caller closes the Backend.
func Open(name string, cfg Config) (Opened, error) {
	registry.Lock()
	regs := make([]registration, 0, len(registry.byName))
	for _, r := range registry.byName {
		regs = append(regs, r)
	}
	registry.Unlock()
	if name != Auto {
		i := slices.IndexFunc(regs, func(r registration) bool { return r.name == name })
		if i < 0 {
			return Opened{}, fmt.Errorf("%w %q (registered: %s; import the package that registers it)", ErrUnknownBackend, name, strings.Join(Backends(), ", "))
		}
		b, err := regs[i].open(cfg)
		if err != nil {
			return Opened{}, fmt.Errorf("the %s backend is not available: %w", name, err)
		}
		return Opened{Backend: b, Name: name}, nil
	}
	slices.SortFunc(regs, func(a, b registration) int {
		if a.auto != b.auto {
			return b.auto - a.auto
		}
		return strings.Compare(a.name, b.name)
	})
	var passed []string
	for _, r := range regs {
		if r.auto <= 0 {
			continue
		}
		b, err := r.open(cfg)
		if err == nil {
			return Opened{Backend: b, Name: r.name, Fallback: strings.Join(passed, "; ")}, nil
		}
		if !errors.Is(err, ErrNoDevice) {
			return Opened{}, fmt.Errorf("the %s backend: %w", r.name, err)
		}
		passed = append(passed, r.name+": "+err.Error())
	}
	return Opened{}, fmt.Errorf("%w: no registered backend opened (%s)", ErrNoDevice, strings.Join(passed, "; "))
}
