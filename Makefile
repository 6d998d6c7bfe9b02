# streamfold: two commands for a new user — `make demo` and `make test`. Both set up first.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test test-fast check bench soak clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m streamfold demo

# Two pytest workers, each with its own Spark JVM, a test file per worker at a time (module
# fixtures are set up once): most tests wait on Spark's scheduling and py4j rather than on both
# cores (TEST_WORKERS=1: one JVM, as before).
TEST_WORKERS ?= 2

test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The tests not marked slow: a developer's loop (a few minutes); `make test` runs everything, as CI does.
test-fast: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow"

# Static checks (not part of `make test`): types and lint, each tool pinned.
check: setup
	$(PY) -m pip install -q mypy==2.4.1 ruff==0.17.5
	$(PY) -m mypy streamfold
	$(PY) -m ruff check streamfold tests

bench: setup
	$(PY) -m streamfold bench groupby

# Long runs (not part of `make test`: hours on 2 cores): every TPC-H query and seed workload for 30
# batches with deletions; fails unless every snapshot is exact and heap and plans stay flat.
soak: setup
	$(PY) -m streamfold bench soak

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis demo-out bench-out
