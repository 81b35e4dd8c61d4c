# Curate: `make run` starts the app, `make test` runs every check CI runs.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO      ?= go
HTMX    := 2.0.11
UPLOT   := 1.6.32
# The trainer's tests and make gpu-check run under the Python of the
# trainer's environment (trainer/requirements.lock, installed once by
# scripts/trainer-env.sh) unless these name another interpreter.
TORCH_PYTHON ?=
GPU_PYTHON ?=
TESTDIR := $(CURDIR)/.curate-test

.PHONY: run build test generate check-generated lint gotest s3server trainer-env trainer-test trainer-math gpu-check bench chaos assets clean

## run: build and start Curate in dev mode with its own Postgres in ./.curate
# Built, then exec'd, rather than `go run`: go run exits 1 when Ctrl-C
# stops its child, even after a clean shutdown, and make reports that as
# an error. curate itself exits 0 once it has shut down. The dev build
# (-tags dev) links the stand-in that OpenAI jobs go to without a key;
# make build's binary does not.
run:
	$(GO) build -tags dev -o bin/curate-dev ./cmd/curate
	exec ./bin/curate-dev serve --env=dev

build:
	$(GO) build -o bin/curate ./cmd/curate

## generate: regenerate templ and sqlc code
generate:
	$(GO) tool templ generate
	$(GO) tool sqlc generate

## test: generated code up to date, vet, staticcheck, race tests, the trainer's tests and gpu-check
test: check-generated lint gotest trainer-test gpu-check

check-generated:
	@$(GO) tool templ generate >/dev/null 2>&1
	@$(GO) tool sqlc generate
	@$(GO) mod tidy
	@if [ -n "$$(git status --porcelain -- '*.go' '*.templ' go.mod go.sum db/queries)" ]; then \
		echo "generated code or go.mod is stale; run 'make generate' and 'go mod tidy' and commit:"; \
		git status --porcelain -- '*.go' '*.templ' go.mod go.sum db/queries; exit 1; fi

lint:
	$(GO) vet ./...
	$(GO) vet -tags dev ./cmd/curate
	$(GO) tool staticcheck ./...

# One Postgres cluster serves every package's test databases; the blob
# store and scale-out tests start SeaweedFS's S3 gateway from the binary
# that s3server builds once; the tests that run the real trainer use the
# trainer's environment (CURATE_TEST_TRAINER_PYTHON).
gotest:
	@rm -rf $(TESTDIR)
	$(GO) build -o $(TESTDIR)/curate ./cmd/curate
	@s3=$$(GO=$(GO) scripts/s3server.sh); echo "S3 server for the tests: $$s3"
	@[ -n "$${CURATE_TEST_TRAINER_PYTHON:-}" ] || { py=$$(scripts/trainer-env.sh); echo "trainer for the tests: $$py"; }
	@CURATE_DATA_DIR=$(TESTDIR) $(TESTDIR)/curate devdb start >/dev/null
	@export CURATE_S3_SERVER="$$(GO=$(GO) scripts/s3server.sh)"; \
	trainer="$${CURATE_TEST_TRAINER_PYTHON:-}"; [ -n "$$trainer" ] || trainer=$$(scripts/trainer-env.sh); \
	export CURATE_TEST_TRAINER_PYTHON="$$trainer"; \
	export TEST_DATABASE_URL="$$(CURATE_DATA_DIR=$(TESTDIR) $(TESTDIR)/curate devdb url --admin)"; \
	status=0; $(GO) test -race -count=1 -timeout=40m ./... || status=$$?; \
	CURATE_DATA_DIR=$(TESTDIR) $(TESTDIR)/curate devdb stop >/dev/null; exit $$status

## s3server: build SeaweedFS, the S3-compatible server the tests run against, once (cached in ~/.cache/curate; 5 minutes or more cold)
s3server:
	@GO=$(GO) scripts/s3server.sh

## trainer-env: install trainer/requirements.lock into a venv once (cached in ~/.cache/curate, about 3 GB cold) and print its Python
trainer-env:
	@scripts/trainer-env.sh

# The Python a trainer target runs: $(1) when set, else the trainer's
# environment, installed on first use. A failed install fails the target.
trainer_python = $(if $(1),$(1),$$(scripts/trainer-env.sh))

## trainer-test: every trainer test (unit, math, methods on a tiny model) under $(TORCH_PYTHON) (default: the trainer's environment)
trainer-test:
	@py="$(call trainer_python,$(TORCH_PYTHON))"; echo "trainer tests under $$py"; \
	cd trainer && HF_HUB_OFFLINE=1 $$py -m unittest discover -s tests -v

## trainer-math: the trainer's tests that need torch alone (tests/test_losses.py, test_policy_losses.py, test_policy_method.py) under $(TORCH_PYTHON) (default: the trainer's environment)
trainer-math:
	@py="$(call trainer_python,$(TORCH_PYTHON))"; \
	cd trainer && $$py -m unittest discover -s tests -p 'test_*losses.py' -v; \
	$$py -m unittest discover -s tests -p test_policy_method.py -v

## gpu-check: every training method a few steps on a tiny model built here, through the real trainer; one table and $$CURATE_GPU_CHECK_OUT (default .curate/gpu-check.json); a GPU when there is one
gpu-check:
	@py="$(call trainer_python,$(GPU_PYTHON))"; \
	cd trainer && HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 $$py gpu_check.py

## bench: benchmarks beside raw PostgreSQL, each run BENCH_COUNT times (default 5), then one table of medians [min–max] (CURATE_BENCH_ROWS sizes the database ones)
# One package's benchmarks at a time (-p 1): go test runs as many test
# binaries at once as there are cores, and a benchmark measured beside
# another package's measures both.
BENCH_COUNT ?= 5
bench:
	@rm -rf $(TESTDIR)
	$(GO) build -o $(TESTDIR)/curate ./cmd/curate
	@CURATE_DATA_DIR=$(TESTDIR) $(TESTDIR)/curate devdb start >/dev/null
	@export TEST_DATABASE_URL="$$(CURATE_DATA_DIR=$(TESTDIR) $(TESTDIR)/curate devdb url --admin)"; \
	status=0; \
	$(GO) test -p 1 -run='^$$' -bench=. -benchmem -count=$(BENCH_COUNT) ./internal/... > $(TESTDIR)/bench.out 2>&1 || status=$$?; \
	$(GO) test -p 1 -run='^$$' -bench=. -benchtime=1x -count=$(BENCH_COUNT) -timeout=8h ./web/... ./jobs/... >> $(TESTDIR)/bench.out 2>&1 || status=$$?; \
	$(GO) run ./cmd/benchtable < $(TESTDIR)/bench.out; \
	CURATE_DATA_DIR=$(TESTDIR) $(TESTDIR)/curate devdb stop >/dev/null; exit $$status

## chaos: the loop's chaos run (TestLoopSurvivesChaos) CURATE_CHAOS_RUNS times (default 10), killing the server CURATE_CHAOS_KILLS times in each (default 10), then how many passed and the time each restart took to go on (on TEST_DATABASE_URL when set, else a Postgres of its own)
CURATE_CHAOS_RUNS ?= 10
CURATE_CHAOS_KILLS ?= 10
chaos:
	@rm -rf $(TESTDIR)
	$(GO) build -o $(TESTDIR)/curate ./cmd/curate
	@own=; if [ -z "$${TEST_DATABASE_URL:-}" ]; then CURATE_DATA_DIR=$(TESTDIR) $(TESTDIR)/curate devdb start >/dev/null; own=1; \
		export TEST_DATABASE_URL="$$(CURATE_DATA_DIR=$(TESTDIR) $(TESTDIR)/curate devdb url --admin)"; fi; \
	out=$(TESTDIR)/chaos.txt; : > $$out; passed=0; \
	for i in $$(seq 1 $(CURATE_CHAOS_RUNS)); do \
		if CURATE_CHAOS_KILLS=$(CURATE_CHAOS_KILLS) CURATE_CHAOS_OUT=$$out $(GO) test -count=1 -timeout=40m -run '^TestLoopSurvivesChaos$$' -v ./cmd/curate \
			> $(TESTDIR)/chaos-$$i.log 2>&1; then passed=$$((passed+1)); echo "run $$i: passed"; \
		else echo "run $$i: FAILED (see $(TESTDIR)/chaos-$$i.log)"; fi; \
	done; \
	grep -o 'resume_s=[0-9.]*' $$out | cut -d= -f2 | sort -n | awk '{a[NR]=$$1; if ($$1 <= 90) n++} END {if (NR) \
		printf "%d kills; time to go on after each restart: min %.1fs, median %.1fs, max %.1fs; %d within 90s\n", NR, a[1], a[int((NR+1)/2)], a[NR], n}'; \
	[ -z "$$own" ] || CURATE_DATA_DIR=$(TESTDIR) $(TESTDIR)/curate devdb stop >/dev/null; \
	echo "$$passed of $(CURATE_CHAOS_RUNS) chaos runs passed"; [ $$passed -eq $(CURATE_CHAOS_RUNS) ]

## assets: fetch the vendored front-end libraries from npm (results are committed)
assets:
	@tmp=$$(mktemp -d); cd $$tmp && npm pack --silent htmx.org@$(HTMX) >/dev/null && tar xzf htmx.org-$(HTMX).tgz; \
	cp $$tmp/package/dist/htmx.min.js $(CURDIR)/static/vendor/htmx-$(HTMX).min.js; rm -rf $$tmp
	@tmp=$$(mktemp -d); cd $$tmp && npm pack --silent uplot@$(UPLOT) >/dev/null && tar xzf uplot-$(UPLOT).tgz; \
	cp $$tmp/package/dist/uPlot.iife.min.js $(CURDIR)/static/vendor/uplot-$(UPLOT).iife.min.js; \
	cp $$tmp/package/dist/uPlot.min.css $(CURDIR)/static/vendor/uplot-$(UPLOT).min.css; \
	cp $$tmp/package/LICENSE $(CURDIR)/static/vendor/uplot-$(UPLOT).LICENSE; rm -rf $$tmp
	@echo "static/vendor updated: htmx $(HTMX), uplot $(UPLOT)"

clean:
	rm -rf bin $(TESTDIR)
