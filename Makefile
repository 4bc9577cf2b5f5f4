# Switchback — build, test and benchmark entry points. `make help` lists them.
SHELL := /bin/bash
GO ?= go
# Tools run with `go run` at pinned versions: nothing to install by hand.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 30s
TEST_TIMEOUT ?= 20m

.DEFAULT_GOAL := help

-include Makefile.k8s

NATSCLI_VERSION := v0.5.0
NATS := $(CURDIR)/.cache/bin/nats
# promtool tests deploy/monitoring's alerts (deploy/monitoring/monitoring_test.go
# runs it from here). A large build: ~5 min cold on 2 cores, once.
PROMETHEUS_VERSION := v0.316.0
PROMTOOL := $(CURDIR)/.cache/bin/promtool

.PHONY: help setup tools chromium promtool test test-faults chaos test-short lint fmt fuzz bench bench-scale demo build image image-push image-release chart-render

help: ## list targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-18s %s\n", $$1, $$2}'

setup: testenv-bins tools chromium ## download modules; build kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kubectl, the nats CLI and promtool into .cache/; install chromium
	$(GO) mod download

tools: $(NATS) $(PROMTOOL) ## the nats CLI (for tailing the stream) and promtool (for the alerts' tests) into .cache/bin

# The report's test (cmd/switchback/report_test.go) loads the page in it.
chromium: ## headless Chromium (Debian package), for the report's browser test; installed only if missing
	@command -v chromium >/dev/null || command -v chromium-headless-shell >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq chromium; }

$(NATS):
	GOBIN=$(CURDIR)/.cache/bin $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI_VERSION)

promtool: $(PROMTOOL) ## promtool alone into .cache/bin (deploy/monitoring's tests build it this way when missing)

$(PROMTOOL):
	GOBIN=$(CURDIR)/.cache/bin $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VERSION)

build: ## build bin/switchback
	$(GO) build -ldflags "-X main.version=$$(cat VERSION)-dev" -o bin/switchback ./cmd/switchback

# Images: OCI layouts and docker-load tarballs under .cache/image, built with
# no container daemon (internal/ociimage). REGISTRY names them; the default is
# the documented name.
REGISTRY ?= ghcr.io/switchback-dev
PLATFORMS ?= linux/amd64,linux/arm64

image: ## build the switchback and switchback-nats OCI images into .cache/image (reproducible: same commit, same digest)
	$(GO) run ./hack/image --registry $(REGISTRY) --platforms $(PLATFORMS) --out .cache/image

image-push: ## build and push both images: make image-push REGISTRY=registry.example.com/switchback
	$(GO) run ./hack/image --registry $(REGISTRY) --platforms $(PLATFORMS) --out .cache/image --push

image-release: ## build and push the release in VERSION and pin both digests in deploy/ and the chart (commit the pins)
	$(GO) run ./hack/image --registry $(REGISTRY) --platforms $(PLATFORMS) --out .cache/image --version $$(cat VERSION) --push --pin

HELM := $(GO) run helm.sh/helm/v3/cmd/helm@v3.22.0

chart-render: ## render the Helm chart (default values) to stdout: make chart-render | kubectl apply --dry-run=server -f -
	@$(HELM) template switchback deploy/chart/switchback -n longhorn-system --kube-version 1.30.0 --include-crds $(CHART_FLAGS)

demo: ## the main job: a whole upgrade of a simulated cluster on embedded NATS, shown live
	$(GO) run ./cmd/switchback demo $(DEMO_FLAGS)

test: testenv-bins tools chromium ## run every test: unit, fuzz seeds, embedded NATS, real kube-apiserver, then the fault suite
	@if [ "$${SKIP_APISERVER:-}" = 1 ]; then echo "WARNING: SKIP_APISERVER=1: tests that need kube-apiserver are SKIPPED"; fi
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v '/test/faults$$')
	$(MAKE) test-faults

# Local-directory mode (no package argument) streams the suite's output, so
# its summary table is shown even when every scenario passes.
test-faults: testenv-bins ## the process-level fault-injection suite (kill -9, restarts, outages); prints its summary table
	cd test/faults && $(GO) test -count=1 -timeout 15m

CHAOS_RUNS ?= 100
CHAOS_SEED ?= 1
CHAOS_PLANE ?=

# Each schedule is one upgrade of three nodes under its faults: about 25 s
# on the simulated data plane, 30 s on the Longhorn path (2 cores). The
# recovery times go to .cache/bench-chaos-PLANE.txt, which make bench puts into
# BENCHMARKS.md (rewritten here too when make bench's figures are there).
chaos: testenv-bins ## the nemesis: CHAOS_RUNS seeded fault schedules per data plane from CHAOS_SEED (CHAOS_PLANE=sim|longhorn for one); prints the chaos table
	cd test/faults && CHAOS_RUNS=$(CHAOS_RUNS) CHAOS_SEED=$(CHAOS_SEED) CHAOS_PLANE=$(CHAOS_PLANE) $(GO) test -count=1 -run '^TestChaos$$' -timeout 600m
	@if [ -f .cache/bench.txt ]; then cat .cache/bench.txt $$(ls .cache/bench-scale.txt .cache/bench-chaos-*.txt 2>/dev/null) | $(GO) run ./hack/benchreport -o BENCHMARKS.md; fi

test-short: ## fast tests only (no NATS cluster, no apiserver)
	SKIP_APISERVER=1 $(GO) test -short -count=1 ./...

lint: ## gofmt check, go vet, staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

fuzz: ## run every fuzz target for FUZZTIME each (default 30s)
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

BENCH_COUNT ?= 3

# BenchmarkScale (the demo at 50 and 200 nodes, ~7 min for 3 runs) runs
# apart, in bench-scale: its last figures (.cache/bench-scale.txt) stay in
# the report that bench writes.
bench: ## run every benchmark BENCH_COUNT times (but BenchmarkScale: see bench-scale) and write BENCHMARKS.md (min/median/max)
	@mkdir -p .cache
	set -o pipefail; $(GO) test -run '^$$' -p 1 -bench . -skip '^BenchmarkScale$$' -benchmem -count $(BENCH_COUNT) -timeout 60m ./... | tee .cache/bench.txt
	cat .cache/bench.txt $$(ls .cache/bench-scale.txt .cache/bench-chaos-*.txt 2>/dev/null) | $(GO) run ./hack/benchreport -o BENCHMARKS.md

bench-scale: ## run BenchmarkScale (the demo at 50 and 200 nodes × 20 volumes) BENCH_COUNT times and rewrite BENCHMARKS.md with it
	@mkdir -p .cache
	set -o pipefail; $(GO) test -run '^$$' -bench '^BenchmarkScale$$' -count $(BENCH_COUNT) -timeout 60m ./test/perf | tee .cache/bench-scale.txt
	cat $$(ls .cache/bench.txt 2>/dev/null) .cache/bench-scale.txt $$(ls .cache/bench-chaos-*.txt 2>/dev/null) | $(GO) run ./hack/benchreport -o BENCHMARKS.md
