# dagrun: the developer's commands. `make test` is what CI runs.
GO ?= go
# Fuzz budgets are counts of inputs, not durations: with a duration, Go
# 1.26's fuzz coordinator can fail a target with "context deadline
# exceeded" when the time runs out (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 20000x

.PHONY: build test unit race fuzz-short fuzz bench browser-deps gpu-build

build:
	$(GO) build ./...

# Everything CI checks: vet, the unit tests, the race detector on the
# concurrent packages, and a short fuzz of the spec parser, the planner, the
# rendezvous frames and the trace reader.
test: unit race fuzz-short

unit:
	$(GO) vet ./...
	$(GO) test ./...

race:
	$(GO) test -race ./internal/comm/... ./cpu/... ./executor/...

fuzz-short:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./spec
	$(GO) test -run '^$$' -fuzz '^FuzzPlan$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./planner
	$(GO) test -run '^$$' -fuzz '^FuzzFrames$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./internal/comm
	$(GO) test -run '^$$' -fuzz '^FuzzReadChrome$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./trace

# Longer fuzzing for a developer's machine.
fuzz:
	$(MAKE) fuzz-short FUZZTIME=1000000x

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./planner ./cpu ./executor ./trace

# Headless Chromium for the picture tests (trace/browser_test.go).
browser-deps:
	bash scripts/install-chromium.sh

# GPU binaries and inputs for scripts/gpu-check.sh, built here into .gpu/.
gpu-build:
	bash scripts/gpu-build.sh
