# Switchback — build, test and benchmark entry points. `make help` lists them.
SHELL := /bin/bash
GO ?= go
# Tools run with `go run` at pinned versions: nothing to install by hand.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 30s
TEST_TIMEOUT ?= 20m

.DEFAULT_GOAL := help

-include Makefile.k8s

.PHONY: help setup test test-short lint fmt fuzz bench

help: ## list targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-18s %s\n", $$1, $$2}'

setup: testenv-bins ## download modules and build the test binaries (kube-apiserver, etcd, kubectl)
	$(GO) mod download

test: testenv-bins ## run every test: unit, fuzz seeds, embedded NATS, real kube-apiserver
	@if [ "$${SKIP_APISERVER:-}" = 1 ]; then echo "WARNING: SKIP_APISERVER=1: tests that need kube-apiserver are SKIPPED"; fi
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

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

bench: ## run the benchmarks (see BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./... | tee .cache/bench.txt
