#!/usr/bin/env bash
# The GPU check of the mujoco-warp tier (issue 19): one prepared script for a machine with an NVIDIA
# GPU, in the repository root. Under 8 minutes in all; each stage has its own time limit and writes
# its results as it goes, so a stage cut short keeps what it measured:
#
#   1. (<= 200 s) the equivalence tests with the Warp engines on CUDA (SCENEFACTORY_TEST_DEVICE=cuda;
#      the first stage also compiles MuJoCo Warp's kernels for the GPU) -> $OUT/equivalence.xml, .log
#   2. (<= 170 s) the CASPS sweep: 256, 1024, 4096 and 8192 worlds x 16 cars on mujoco-warp, 120 Hz
#      physics, 30 Hz policy, the full environment step with policy inference, memory per world
#      -> $OUT/drive_throughput_cuda.json
#   3. (<= 70 s) Go1 on MuJoCo Warp: environment steps/s (the numpy task on the CPU, state copied
#      every physics step) and the physics alone, 4096 and 16384 robots -> $OUT/go1_throughput_cuda.json
#
# Environment: OUT (default benchmarks/results/gpu), PY (default .venv/bin/python, else python3),
# WHEELS (below).
# Packages: the project's dependencies must import. A machine without a registry (the lent H200s:
# Python 3.12 with torch, numpy, scipy, matplotlib, rich, onnx) needs the others carried as wheels in
# WHEELS (default .whl/; cp312 for the compiled ones: mujoco, tensordict, crc32c; mujoco-warp,
# warp-lang, rsl-rl-lib and their own needs); the script installs them into /tmp/site first.
# warp-lang's wheel (149 MB) is more than one transfer carries: split it (`split -b 50M NAME.whl
# NAME.whl.part-`), copy the parts in successive calls into one folder of the warm machine, point
# WHEELS there, and the script joins them.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks/results/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -z "${PY:-}" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi

WHEELS=${WHEELS:-.whl}
if [ -d "$WHEELS" ]; then
  mkdir -p /tmp/wheels
  for part in "$WHEELS"/*.whl.part-aa; do
    [ -e "$part" ] || continue
    name=$(basename "$part" .part-aa)
    cat "$WHEELS/$name".part-* > "/tmp/wheels/$name"
  done
  cp "$WHEELS"/*.whl /tmp/wheels/ 2>/dev/null
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    /tmp/wheels/*.whl || exit 1
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}"

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  "$PY" -c 'import torch, warp, mujoco, mujoco_warp; print("torch", torch.__version__, "cuda", torch.version.cuda); print("warp", warp.__version__, "mujoco", mujoco.__version__, "mujoco_warp", mujoco_warp.__version__)'
  nproc
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

echo "== 1. equivalence tests on cuda"
SCENEFACTORY_TEST_DEVICE=cuda timeout 200 "$PY" -m pytest -q -p no:cacheprovider \
  tests/engines/test_warp_equivalence.py tests/engines/test_mjwarp.py --junitxml="$OUT/equivalence.xml" 2>&1 \
  | tee "$OUT/equivalence.log" | tail -15

echo "== 2. CASPS sweep (mujoco-warp, cuda, x16 cars, 120 Hz physics, 30 Hz policy)"
timeout 170 "$PY" benchmarks/drive_throughput.py --engine mujoco-warp --device cuda --physics-hz 120 \
  --policy-hz 30 --agents 16 --worlds 256 1024 4096 8192 --steps 30 --warmup 5 \
  --out "$OUT/drive_throughput_cuda.json" 2>&1 | tail -8

echo "== 3. Go1 on MuJoCo Warp (cuda)"
timeout 70 "$PY" benchmarks/go1_throughput.py --engine mujoco-warp --device cuda --envs 4096 16384 --steps 20 \
  --out "$OUT/go1_throughput_cuda.json" 2>&1 | tail -4

ls -l "$OUT"
