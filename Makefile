# scenefactory — two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed
DEMO_OUT ?= runs/demo

.PHONY: venv demo test test-fast lint typecheck docs unit bench clean proto

venv: $(STAMP)

$(STAMP): pyproject.toml tested-versions.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]" -c tested-versions.txt
	touch $(STAMP)

demo: venv
	$(VENV)/bin/scenefactory demo --out $(DEMO_OUT)

lint: venv
	$(VENV)/bin/ruff check src tests benchmarks docs
	$(VENV)/bin/ruff format --check src tests benchmarks docs
	$(VENV)/bin/lint-imports

typecheck: venv
	$(VENV)/bin/mypy

# The documentation site (mkdocs.yml) into site/: --strict makes every warning an error (a broken
# link or anchor, a nav entry to a missing page, a docstring mkdocstrings cannot read); the CLI
# reference and the results pages are generated at build time (docs/hooks/generate.py). Not --quiet:
# it hides the warnings from strict mode's count, so a broken link would pass (tests/test_docs.py).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

unit: venv
	$(VENV)/bin/pytest

test: lint typecheck docs unit

# The quick loop: every test but the end-to-end ones marked slow (`make test` runs those too).
test-fast: venv
	$(VENV)/bin/pytest -m "not slow"

bench: venv
	$(PY) benchmarks/drive_throughput.py --engine kinematic
	$(PY) benchmarks/drive_throughput.py --engine mujoco --physics-hz 120 --policy-hz 30
	$(PY) benchmarks/real_scenes.py
	$(VENV)/bin/scenefactory --threads 1 bench drive --scenes benchmarks/.cache/real_scenes/varied_agents/out/json \
		--agents auto --min-active-fraction 0.5 --warmup 200 --steps 400 --out benchmarks/results/bench_drive_varied_agents.json
	$(PY) benchmarks/scene_loading.py --scenes 10000

# Regenerate the checked-in WOMD scenario protobuf code. grpcio-tools (protoc) is needed only here,
# so it goes into its own folder inside the venv, pinned to the release whose gencode (protobuf
# 5.26.1) the runtime range in pyproject.toml (protobuf>=5,<8) accepts; the venv's runtime is untouched.
WOMD_PROTO_DIR = src/scenefactory/scenes/womd
PROTOC_TOOLS   = $(VENV)/protoc-tools
proto: venv
	$(PY) -m pip install --quiet --no-warn-conflicts --upgrade --target $(PROTOC_TOOLS) grpcio-tools==1.63.2
	PYTHONPATH=$(PROTOC_TOOLS) $(PY) -m grpc_tools.protoc -I $(WOMD_PROTO_DIR) \
		--python_out=$(WOMD_PROTO_DIR) --pyi_out=$(WOMD_PROTO_DIR) scenario.proto
	PYTHONPATH=$(PROTOC_TOOLS) $(PY) -m grpc_tools.protoc -I $(WOMD_PROTO_DIR) \
		--python_out=$(WOMD_PROTO_DIR) --pyi_out=$(WOMD_PROTO_DIR) example.proto

clean:
	rm -rf $(VENV) runs site .pytest_cache .mypy_cache .ruff_cache
