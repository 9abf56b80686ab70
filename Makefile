PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo manifests dashboard-screenshots dry-run-demo bench-e2e bench-dashboard lint bench bench-cel bench-instructions bench-webhook bench-sandbox bench-snapshot bench-pass bench-simulate soak chaos mutate clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The suite in parallel (pytest-xdist): two workers a core, at most 8, since many tests wait on
# servers and child processes (on 2 cores: 4 workers, 5 min instead of 6 with 2, 12 with none).
# Workers take tests from each other's queues; each has its own session fixtures.
# TEST_WORKERS=0 runs the suite in this one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( 2 * n < 8 ? 2 * n : 8 )))

test: $(STAMP)
	bash scripts/test-tools.sh
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

# The whole loop on the sandbox fleet: webhook, Karmada's controllers and the reconciler, jobs
# of three tenants, a cluster failure, a summary (docs/demo.md).
demo: $(STAMP)
	$(BIN)/fleetgate demo

# The release manifests in dist/ from deploy/ (docs/install.md): IMAGE names your image.
IMAGE ?= fleetgate:0.1.0

manifests:
	bash scripts/manifests.sh $(IMAGE)

# One scheduling cycle of policies/ on the example fleet snapshot, without running anything.
# The dashboard's pages as docs/images/dashboard-*.png, taken in headless Chromium while the demo
# runs (docs/dashboard.md).
dashboard-screenshots: $(STAMP)
	bash scripts/test-tools.sh
	$(BIN)/fleetgate demo --plain --screenshots docs/images

dry-run-demo: $(STAMP)
	$(BIN)/fleetgate dry-run --policies policies/ --snapshot examples/fleet-snapshot.yaml \
		--now 2025-03-10T10:00:00Z

bench: $(STAMP)
	$(BIN)/fleetgate bench --jobs 15000 --clusters 10 --queues 30 --repeats 5
	$(BIN)/fleetgate bench --jobs 50000 --clusters 100 --queues 1000 --repeats 5

bench-cel: $(STAMP)
	$(BIN)/python benchmarks/cel_runners.py

bench-instructions: $(STAMP)
	$(BIN)/python benchmarks/cycle_instructions.py --jobs 15000 --clusters 10 --queues 30
	$(BIN)/python benchmarks/cycle_instructions.py --jobs 50000 --clusters 100 --queues 1000

bench-webhook: $(STAMP)
	$(BIN)/python benchmarks/webhook_load.py
	$(BIN)/python benchmarks/webhook_load.py --tls

# The sandbox end to end: SANDBOX_TEMPLATES PyTorchJobs created over HTTPS, their bindings
# watched appearing; prints objects/s, watch lag p50/p99 and the sandbox's RSS.
SANDBOX_TEMPLATES ?= 10000

bench-sandbox: $(STAMP)
	$(BIN)/python benchmarks/sandbox_load.py --templates $(SANDBOX_TEMPLATES)

# End to end: E2E_JOBS job templates created at once against the sandbox with the webhook and
# the reconciler running; prints the time until every binding is decided (admitted, or pending
# with its reason), binds/s, and where the time and CPU go (docs/performance.md).
E2E_JOBS ?= 10000

bench-e2e: $(STAMP)
	$(BIN)/python benchmarks/e2e_load.py --jobs $(E2E_JOBS) --backlog
	$(BIN)/python benchmarks/e2e_load.py --jobs $(E2E_JOBS)

# The dashboard on fleetgate bench's 50,000-job fleet (100 clusters, 1,000 queues) in headless
# Chromium: first paint, bytes per update, the visibility API's CPU (docs/dashboard.md).
bench-dashboard: $(STAMP)
	bash scripts/test-tools.sh
	$(BIN)/python benchmarks/dashboard_load.py --jobs 50000 --clusters 100 --queues 1000

# Reading a ~45 MiB snapshot (29,000 objects, one List) with libyaml's parser and PyYAML's.
bench-snapshot: $(STAMP)
	$(BIN)/python benchmarks/snapshot_load.py --objects 29000

# One reconciler pass on a settled 20,000-object fleet after one binding changed (no API server):
# the pass and its stages (snapshot, cycle, plan, writes), median and max of 20.
bench-pass: $(STAMP)
	$(BIN)/python benchmarks/reconciler_pass.py --objects 20000 --passes 20

# fleetgate simulate's loop on a generated trace: SIM_JOBS jobs on 10 clusters of 104 GPUs, one
# cycle at most every SIM_INTERVAL simulated seconds; prints wall time, jobs/s, peak RSS.
SIM_JOBS ?= 100000
SIM_INTERVAL ?= 120

bench-simulate: $(STAMP)
	$(BIN)/python benchmarks/simulate_load.py --jobs $(SIM_JOBS) --interval $(SIM_INTERVAL)
	$(BIN)/python benchmarks/simulate_load.py --jobs 20000 --interval $(SIM_INTERVAL) --profile 25

# Soak (not in CI): the webhook under good traffic, garbage, slow and idle clients, CEL-heavy
# requests and policy rewrites for SOAK_SECONDS; prints a summary, fails on a good request over
# 1 s, any 5xx or unbounded RSS growth.
SOAK_SECONDS ?= 60

soak: $(STAMP)
	$(BIN)/python benchmarks/soak.py --seconds $(SOAK_SECONDS)

# Two fleetgate serve replicas; the leader SIGSTOPped and SIGKILLed mid-burst, in turn, while
# CHAOS_JOBS jobs run: no write from a replica not holding the Lease, every job admitted once,
# writes per binding (tests/reconciler/test_chaos.py; a smaller run is part of make test).
CHAOS_JOBS ?= 1000
CHAOS_STOPS ?= 6
CHAOS_KILLS ?= 6
chaos: $(STAMP)
	CHAOS_JOBS=$(CHAOS_JOBS) CHAOS_STOPS=$(CHAOS_STOPS) CHAOS_KILLS=$(CHAOS_KILLS) \
		$(BIN)/python -m pytest tests/reconciler/test_chaos.py -q -s

# Mutation testing (not in CI) of engine/cycle/, engine/quantity.py and webhook/mutate.py, in a
# scratch copy: mutmut rewrites the sources it mutates. Bounded by MUTATE_SECONDS; MUTANTS limits
# it to mutant-name globs, e.g. MUTANTS='engine.quantity.* webhook.mutate.*'. Prints the kill
# rate and the survivors; `cd $(MUTATE_DIR) && mutmut show NAME` shows one.
MUTATE_SECONDS ?= 1800
MUTATE_DIR ?= /tmp/fleetgate-mutate
MUTANTS ?=
KARMADA_CRDS ?= $(abspath ../shared/crds/karmada)

mutate: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,mutate]'
	rm -rf $(MUTATE_DIR) && mkdir -p $(MUTATE_DIR)
	tar --exclude-vcs --exclude=./$(VENV) --exclude=./mutants --exclude=./.hypothesis \
		--exclude=./.pytest_cache --exclude=./.ruff_cache -cf - . | tar -xf - -C $(MUTATE_DIR)
	cd $(MUTATE_DIR) && FLEETGATE_KARMADA_CRDS=$(KARMADA_CRDS) \
		timeout --signal=INT $(MUTATE_SECONDS) $(CURDIR)/$(BIN)/mutmut run $(MUTANTS) \
		> mutmut-run.log 2>&1; tail -c 2000 mutmut-run.log | tr '\r' '\n' | tail -n 6
	cd $(MUTATE_DIR) && $(CURDIR)/$(BIN)/mutmut export-cicd-stats >/dev/null && \
		$(CURDIR)/$(BIN)/mutmut results > mutmut-results.txt && \
		$(CURDIR)/$(BIN)/python benchmarks/mutation_summary.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
