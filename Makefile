# dagrun: the developer's commands. CI (.ci/run) runs make test, then
# make check.
GO ?= go
# Fuzz budgets are counts of inputs, not durations: with a duration, Go
# 1.26's fuzz coordinator can fail a target with "context deadline
# exceeded" when the time runs out (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 20000x
# Loops and branches plan more slowly per input (about 180 a second).
FUZZTIME_CONTROL ?= 4000x

# Fuzz targets that take longer per input: a few thousand inputs each.
FUZZTIME_SLOW ?= 2000x

.PHONY: build test check vet short unit race fuzz-short fuzz nocgo mutation bench browser-deps gpu-build

build:
	$(GO) build ./...

# The README's test command, for every change: vet and the tests in -short
# mode (the long tests, the race detector, fuzzing and the browser tests
# are make check's); go test prints each package as it finishes. From a
# fresh clone with an empty build cache: about 70 s and 320 MB on 2 cores.
test: vet short

# Everything CI checks, after make test: every test at full length, the
# race detector on every package that starts goroutines, a short fuzz of
# every fuzz target, the build without cgo, and the mutation check (bugs
# planted in the safety-critical code, each of which the tests must catch).
check: vet unit race fuzz-short nocgo mutation

vet:
	@echo "go vet ./..."
	$(GO) vet ./...

short:
	$(GO) test -short ./...

unit:
	$(GO) test -p 1 ./...

# The race detector's binaries are large: one package at a time. Every
# package whose code or tests start goroutines: the concurrent ones at full
# length; the command (whose scripts run it as a race-built binary), the
# graph's parallel initialisation, the spec's file readers, the trace's
# readers, the job's worlds of ranks and the CUDA backend (its GPU tests
# skip without a driver) in -short; of the planner, the test whose packing
# runs on goroutines.
race:
	$(GO) test -race -p 1 ./internal/comm/... ./cpu/... ./executor/...
	$(GO) test -race -short -p 1 ./cmd/dagrun ./dag ./spec ./trace ./job ./cuda
	$(GO) test -race -run 'TestMemoryConcurrent' ./planner/memory

# Every fuzz target (grep -rn 'func Fuzz' lists them), a short budget each.
fuzz-short:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./spec
	$(GO) test -run '^$$' -fuzz '^FuzzParseExpr$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./spec
	$(GO) test -run '^$$' -fuzz '^FuzzNotSize$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./spec
	$(GO) test -run '^$$' -fuzz '^FuzzPlan$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./planner
	$(GO) test -run '^$$' -fuzz '^FuzzPlanControl$$' -fuzztime $(FUZZTIME_CONTROL) -fuzzminimizetime 100x ./planner
	$(GO) test -run '^$$' -fuzz '^FuzzFuse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./planner
	$(GO) test -run '^$$' -fuzz '^FuzzSplit$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./planner
	$(GO) test -run '^$$' -fuzz '^FuzzPackArena$$' -fuzztime $(FUZZTIME_SLOW) -fuzzminimizetime 100x ./planner/memory
	$(GO) test -run '^$$' -fuzz '^FuzzPerfModel$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./planner/perf
	$(GO) test -run '^$$' -fuzz '^FuzzBuild$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./dag
	$(GO) test -run '^$$' -fuzz '^FuzzGemmChecks$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./dag
	$(GO) test -run '^$$' -fuzz '^FuzzSplitmixCounterForm$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./dag
	$(GO) test -run '^$$' -fuzz '^FuzzFrames$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./internal/comm
	$(GO) test -run '^$$' -fuzz '^FuzzReadChrome$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./trace
	bash scripts/fuzz-targets.sh

# Bugs planted one at a time in the safety-critical code (the table in
# internal/mutcheck/mutants.txt), each run against its packages' short
# tests through go test -overlay: every one must be caught, and every
# snippet must still match the code.
mutation:
	GO=$(GO) $(GO) run ./internal/mutcheck -j 2

# The build without a C compiler (CGO_ENABLED=0): builds, vets, runs every
# package's tests in -short mode, and runs the examples on the CPU backend.
nocgo:
	GO=$(GO) bash scripts/nocgo-check.sh

# Longer fuzzing for a developer's machine.
fuzz:
	$(MAKE) fuzz-short FUZZTIME=1000000x FUZZTIME_CONTROL=100000x FUZZTIME_SLOW=100000x

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./planner/... ./cpu ./executor ./trace

# Headless Chromium for the picture tests (trace/browser_test.go).
browser-deps:
	bash scripts/install-chromium.sh

# GPU binaries and inputs for scripts/gpu-check.sh, built here into .gpu/.
gpu-build:
	bash scripts/gpu-build.sh
