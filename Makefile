# streamfold: two commands for a new user — `make demo` and `make test`. Both set up first.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test check bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m streamfold demo

test: setup
	$(PY) -m pytest -q

# Static checks (not part of `make test`): types.
check: setup
	$(PY) -m pip install -q mypy==2.4.1
	$(PY) -m mypy streamfold

bench: setup
	$(PY) -m streamfold bench groupby

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis demo-out bench-out
