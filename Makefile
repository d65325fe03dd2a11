# dagrun: the developer's commands. CI (.ci/run) runs make test, then
# make check.
GO ?= go
# Fuzz budgets are counts of inputs, not durations: with a duration, Go
# 1.26's fuzz coordinator can fail a target with "context deadline
# exceeded" when the time runs out (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 20000x
# Loops and branches plan more slowly per input (about 180 a second).
FUZZTIME_CONTROL ?= 4000x

.PHONY: build test check vet short unit race fuzz-short fuzz nocgo bench browser-deps gpu-build

build:
	$(GO) build ./...

# The README's test command, for every change: vet and the tests in -short
# mode (the long tests, the race detector, fuzzing and the browser tests
# are make check's); go test prints each package as it finishes. From a
# fresh clone with an empty build cache: about 70 s and 320 MB on 2 cores.
test: vet short

# Everything CI checks, after make test: every test at full length, the
# race detector on the concurrent packages, a short fuzz of the spec
# parser, the planner (with and without loops and branches), the
# rendezvous frames and the trace reader, and
# the build without cgo.
check: vet unit race fuzz-short nocgo

vet:
	@echo "go vet ./..."
	$(GO) vet ./...

short:
	$(GO) test -short ./...

unit:
	$(GO) test -p 1 ./...

# The race detector's binaries are large: one package at a time. Of the
# planner, the test whose packing runs on goroutines.
race:
	$(GO) test -race -p 1 ./internal/comm/... ./cpu/... ./executor/...
	$(GO) test -race -run 'TestMemoryConcurrent' ./planner/memory

fuzz-short:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./spec
	$(GO) test -run '^$$' -fuzz '^FuzzPlan$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./planner
	$(GO) test -run '^$$' -fuzz '^FuzzPlanControl$$' -fuzztime $(FUZZTIME_CONTROL) -fuzzminimizetime 100x ./planner
	$(GO) test -run '^$$' -fuzz '^FuzzFrames$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./internal/comm
	$(GO) test -run '^$$' -fuzz '^FuzzReadChrome$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./trace

# The build without a C compiler (CGO_ENABLED=0): builds, vets, and runs
# the examples on the CPU backend.
nocgo:
	GO=$(GO) bash scripts/nocgo-check.sh

# Longer fuzzing for a developer's machine.
fuzz:
	$(MAKE) fuzz-short FUZZTIME=1000000x FUZZTIME_CONTROL=100000x

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./planner/... ./cpu ./executor ./trace

# Headless Chromium for the picture tests (trace/browser_test.go).
browser-deps:
	bash scripts/install-chromium.sh

# GPU binaries and inputs for scripts/gpu-check.sh, built here into .gpu/.
gpu-build:
	bash scripts/gpu-build.sh
