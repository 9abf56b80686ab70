PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint bench bench-cel bench-instructions bench-webhook clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

demo: $(STAMP)
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

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
