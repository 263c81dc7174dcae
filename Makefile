# scenefactory — two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed
DEMO_OUT ?= runs/demo

.PHONY: venv demo test lint typecheck unit bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: venv
	$(VENV)/bin/scenefactory demo --out $(DEMO_OUT)

lint: venv
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

typecheck: venv
	$(VENV)/bin/mypy

unit: venv
	$(VENV)/bin/pytest

test: lint typecheck unit

bench: venv
	$(VENV)/bin/scenefactory bench drive --engine kinematic --worlds 256 --agents 16 --out benchmarks/results/kinematic_256x16.json

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
