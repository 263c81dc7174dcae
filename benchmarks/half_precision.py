"""What packing a Go1 policy in float16 costs (``export go1 --half-precision``,
``checkpoint.pack_stage``: weight matrices rounded to float16, the file LZMA-compressed).

For the float32 training checkpoint ``--checkpoint``:

1. **Size**: its actor-only file (``policy.pt`` of ``export go1``) in float32 and packed.
2. **Weights**: the largest relative rounding error of a packed weight (float16 keeps 11 bits:
   at most 2^-11 = 4.9e-4 relative, for values in float16's normal range).
3. **Actions**: both policies act on ``--obs`` observations drawn from the policy's own observation
   statistics (normalizer mean + std · N(0, 1), seed ``--seed``): the mean and largest
   |action difference| (action units; a joint target is home + 0.25 · action), and the mean
   difference over the actions' standard deviation.
4. ``--packed FILE`` (the shipped file): its weights must be this checkpoint's, rounded (it exits 1
   when they are not), so the figures above are the shipped file's.

Writes ``benchmarks/results/half_precision.json`` (``--out``).

Usage: ``.venv/bin/python benchmarks/half_precision.py --checkpoint RUN/checkpoints/model_N.pt
[--packed src/scenefactory/go1/policies/go1_rough.pt] [--obs 4096] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

from scenefactory.evaluation.bench import machine_info
from scenefactory.go1.jobs import save_actor_only
from scenefactory.go1.train import load_go1_policy
from scenefactory.io import write_json

ROOT = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", type=Path, required=True, help="a float32 Go1 training checkpoint")
    ap.add_argument("--packed", type=Path, default=None, help="a packed file made from it, to check")
    ap.add_argument("--obs", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "half_precision.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        full = save_actor_only(args.checkpoint, Path(tmp) / "full.pt")
        half = save_actor_only(args.checkpoint, Path(tmp) / "half.pt", half_precision=True)
        sizes = {"float32_bytes": full.stat().st_size, "packed_bytes": half.stat().st_size}
        exact, packed = load_go1_policy(full), load_go1_policy(half)
    w32, w16 = exact.actor.state_dict(), packed.actor.state_dict()
    rounded = [k for k in w32 if not torch.equal(w32[k], w16[k])]
    errors = (float(((w16[k] - w32[k]).abs() / w32[k].abs().clamp_min(2.0**-14)).max()) for k in rounded)
    rel = max(errors, default=0.0)  # 0: every weight matrix is under HALF_MIN_NUMEL values, none rounded
    if args.packed is not None:
        shipped = load_go1_policy(args.packed).actor.state_dict()
        differ = [k for k in w16 if not torch.equal(shipped[k], w16[k])]
        if differ:
            names = ", ".join(differ)
            print(f"{args.packed}: not {args.checkpoint} rounded ({names} differ)", file=sys.stderr)
            return 1
    norm = exact.actor.obs_normalizer
    gen = torch.Generator().manual_seed(args.seed)
    mean, std = norm._mean.reshape(-1), norm._std.reshape(-1)
    obs = mean + std * torch.randn(args.obs, mean.numel(), generator=gen)
    with torch.no_grad():
        a32, a16 = exact.act(obs), packed.act(obs)
    diff = (a16 - a32).abs()
    result = {
        "command": " ".join(["benchmarks/half_precision.py", *sys.argv[1:]]),
        "checkpoint": str(args.checkpoint),
        "packed": None if args.packed is None else str(args.packed),
        "packed_is_this_checkpoint_rounded": args.packed is not None,
        "seed": args.seed,
        "observations": args.obs,
        "history_frames": exact.task_cfg.history,
        **sizes,
        "rounded_tensors": len(rounded),
        "max_relative_weight_error": rel,
        "mean_abs_action_difference": float(diff.mean()),
        "max_abs_action_difference": float(diff.max()),
        "action_std": float(a32.std()),
        "mean_difference_over_action_std": float(diff.mean() / a32.std()),
        "machine": machine_info(),
    }
    write_json(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
