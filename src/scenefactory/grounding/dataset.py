"""Transition datasets: what learned dynamics models and grounding methods train on.

A dataset is a folder of shards ``shard_00000.npz`` … plus ``meta.json`` (engine, rates, vehicle,
seed, policy mix, counts). Every shard holds N transitions of single agents, flat:

- ``state``       (N, 6) abstract state before the step: x [m], y [m], yaw [rad], speed [m/s],
  yaw rate [rad/s], road-wheel angle [rad] (:data:`STATE_FIELDS`);
- ``action``      (N, 2) the normalized ``[steer, accel]`` applied;
- ``next_state``  (N, 6) the state one policy step later;
- ``friction``    (N,) road friction μ of the world;
- ``episode``     (N,) int64 agent-episode id (unique in the dataset), ``step`` (N,) its step index —
  sort by (episode, step) to rebuild histories;
- ``policy``      (N,) int8 index into ``meta.json``'s ``policies``;
- ``reward``      (N,) float32 the task's reward of the step (optional: :func:`collect` writes it,
  datasets from other sources may lack it).

Collection (:func:`collect`) drives the task's worlds with a mix of policies — a trained one (if a
checkpoint is given), the same with Gaussian action noise, and a smooth random one (an
Ornstein–Uhlenbeck process) — each world keeping one policy kind, over road conditions drawn per
world reset (``water_film_randomization_mm``) on the scenes' surfaces, on the engine an
:class:`~scenefactory.engines.spec.EngineSpec` describes (``meta.json`` keeps it whole as
``engine_spec``, and its tier as ``engine``); with an actuator lag in the spec the recorded action
is the one the policy sent.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.engines.base import VehicleState
from scenefactory.engines.spec import TIERS, EngineSpec
from scenefactory.errors import UserError
from scenefactory.io import atomic_write_bytes, show_value, write_json
from scenefactory.scenes.library import procedural_scenes
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.vehicles.params import VehicleParams

STATE_FIELDS = ("x_m", "y_m", "yaw_rad", "speed_mps", "yaw_rate_radps", "steer_rad")
POLICY_KINDS = ("trained", "noisy", "random")
DATASET_FORMAT = "scenefactory.transitions/1"


def abstract_state(st: VehicleState) -> torch.Tensor:
    """(W, K, 6) abstract state in :data:`STATE_FIELDS` order."""
    return torch.stack(
        (st.pos_xy[..., 0], st.pos_xy[..., 1], st.yaw, st.speed, st.yaw_rate, st.steer), dim=-1
    )


class OrnsteinUhlenbeck:
    """Smooth random actions in [-1, 1]: a' = a + θ(μ − a)·dt + σ·√dt·ε, clipped."""

    def __init__(
        self, shape: tuple[int, ...], generator: torch.Generator, theta: float = 1.0, sigma: float = 0.8
    ):
        self.a = torch.zeros(shape)
        self.g, self.theta, self.sigma = generator, theta, sigma

    def __call__(self, dt: float) -> torch.Tensor:
        noise = torch.randn(self.a.shape, generator=self.g)
        self.a = (self.a - self.theta * self.a * dt + self.sigma * dt**0.5 * noise).clamp(-1.0, 1.0)
        return self.a.clone()


def collect(
    out: Path,
    engine: EngineSpec = EngineSpec(tier="mujoco"),
    worlds: int = 32,
    agents: int = 4,
    steps: int = 200,
    seed: int = 0,
    checkpoint: str | Path | None = None,
    water_film_mm: tuple[float, float] = (0.0, 5.0),
    shard_size: int = 50_000,
    noise_std: float = 0.3,
    num_scenes: int = 60,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Record ``steps`` policy steps of ``worlds × agents`` agents on ``engine`` into shards under
    ``out``; returns the metadata written to ``meta.json``."""
    if min(worlds, agents, steps, shard_size) < 1:
        raise UserError("--worlds, --agents, --steps and the shard size must be positive")
    policy_fn = None
    kinds = ("noisy", "random") if checkpoint is None else POLICY_KINDS
    if checkpoint is not None:
        # the rl layer brings tensordict and rsl-rl (about 2 s to import): loaded only for a trained policy
        from scenefactory.rl.driving import load_policy

        loaded = load_policy(checkpoint)
        policy_fn = loaded.act
        task = replace(loaded.task_cfg, num_worlds=worlds, agents_per_world=agents)
    else:
        task = DrivingTaskConfig(num_worlds=worlds, agents_per_world=agents)
    task = replace(task, water_film_randomization_mm=water_film_mm)
    scenes = procedural_scenes("train", num_scenes, agents, base_seed=seed)
    env = DrivingEnv(task, scenes, engine=engine, seed=seed)
    g = torch.Generator().manual_seed(seed)
    world_kind = torch.tensor([POLICY_KINDS.index(kinds[w % len(kinds)]) for w in range(worlds)])
    ou = OrnsteinUhlenbeck((worlds, agents, 2), g)
    out.mkdir(parents=True, exist_ok=True)
    buf: dict[str, list[np.ndarray]] = {
        k: [] for k in ("state", "action", "next_state", "friction", "episode", "step", "policy", "reward")
    }
    shards, total, obs = 0, 0, env.observations()

    def flush() -> None:
        nonlocal shards, buf
        if not buf["state"]:
            return
        data = {k: np.concatenate(v) for k, v in buf.items()}
        stream = io.BytesIO()
        np.savez_compressed(stream, **data)  # type: ignore[arg-type]  # numpy stubs: **kwds vs allow_pickle
        atomic_write_bytes(out / f"shard_{shards:05d}.npz", stream.getvalue())
        shards += 1
        buf = {k: [] for k in buf}

    with torch.inference_mode():
        for t in range(steps):
            before = abstract_state(env.engine.state()).clone()
            friction = env.friction.clone()
            serial = env.serial.clone()
            steps_in = env.step_count.clone()
            random_a = ou(task.dt_s)
            if policy_fn is not None:
                trained = policy_fn(obs)
                noisy = (trained + noise_std * torch.randn(trained.shape, generator=g)).clamp(-1, 1)
            else:
                noisy = (random_a + noise_std * torch.randn(random_a.shape, generator=g)).clamp(-1, 1)
                trained = noisy
            kind = world_kind.view(-1, 1, 1)
            action = torch.where(kind == 0, trained, torch.where(kind == 1, noisy, random_a))
            res = env.step(action)
            obs = res.obs
            after = abstract_state(res.state)
            sel = res.was_active
            w_idx, a_idx = sel.nonzero(as_tuple=True)
            buf["state"].append(before[sel].numpy().astype(np.float32))
            buf["action"].append(action[sel].numpy().astype(np.float32))
            buf["next_state"].append(after[sel].numpy().astype(np.float32))
            buf["friction"].append(friction[w_idx].numpy().astype(np.float32))
            buf["episode"].append((serial[w_idx] * agents + a_idx).numpy().astype(np.int64))
            buf["step"].append(steps_in[w_idx].numpy().astype(np.int32))
            buf["policy"].append(world_kind[w_idx].numpy().astype(np.int8))
            buf["reward"].append(res.reward[sel].numpy().astype(np.float32))
            total += int(sel.sum())
            if sum(len(x) for x in buf["state"]) >= shard_size:
                flush()
            if progress is not None:
                progress(t + 1, steps)
    flush()
    meta = {
        "format": DATASET_FORMAT,
        "engine": engine.tier,
        "engine_spec": engine.to_dict(),
        "policy_dt_s": task.dt_s,
        "vehicle": asdict(task.vehicle),
        "state_fields": list(STATE_FIELDS),
        "policies": list(POLICY_KINDS),
        "policies_used": list(kinds),
        "checkpoint": str(checkpoint) if checkpoint is not None else None,
        "water_film_mm": list(water_film_mm),
        "worlds": worlds,
        "agents_per_world": agents,
        "steps": steps,
        "seed": seed,
        "transitions": total,
        "shards": shards,
    }
    write_json(out / "meta.json", meta)
    return meta


ARRAYS: dict[str, tuple[tuple[int, ...], str]] = {
    "state": ((len(STATE_FIELDS),), "f"),
    "action": ((2,), "f"),
    "next_state": ((len(STATE_FIELDS),), "f"),
    "friction": ((), "f"),
    "episode": ((), "i"),
    "step": ((), "i"),
}
"""The arrays every shard holds: key → (shape after the transition axis, ``f`` number / ``i`` integer)."""
OPTIONAL_ARRAYS: dict[str, tuple[tuple[int, ...], str]] = {
    "policy": ((), "i"),
    "reward": ((), "f"),
    "scene": ((), "i"),
}
"""Arrays a shard may hold (every shard of a dataset alike); other keys are ignored."""
MAX_FRICTION = 2.0


def _show(value: Any, limit: int = 80) -> str:
    return show_value(value, limit)


def _read_meta(folder: Path) -> dict[str, Any]:
    """``meta.json`` of ``folder`` as an object (its fields are checked by :func:`_check_meta`)."""
    meta_path = folder / "meta.json"
    if not folder.is_dir():
        raise UserError(f"{folder}: no such dataset folder (make one with 'scenefactory collect')")
    if not meta_path.is_file():
        raise UserError(
            f"{folder}: not a transition dataset (no meta.json; make one with 'scenefactory collect')"
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{meta_path}: not UTF-8 text (expected the JSON metadata of a dataset)") from None
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{meta_path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise UserError(f"{meta_path}: nested too deeply (expected the JSON metadata of a dataset)") from None
    except OSError as exc:
        raise UserError(f"{meta_path}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(meta, dict):
        raise UserError(f"{meta_path}: expected a JSON object (the dataset's metadata), got {_show(meta)}")
    return meta


def _count(meta: dict[str, Any], meta_path: Path, key: str) -> int:
    value = meta.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        got = "nothing (missing)" if key not in meta else _show(value)
        raise UserError(f"{meta_path}: field '{key}': expected a whole number >= 0, got {got}")
    return value


def _check_meta(meta: dict[str, Any], meta_path: Path) -> VehicleParams:
    """Refuse metadata that the fits would misread; returns the dataset's vehicle."""
    if meta.get("format") != DATASET_FORMAT:
        raise UserError(
            f"{meta_path}: field 'format': expected {DATASET_FORMAT!r}, got {_show(meta.get('format'))}"
        )
    for key in ("shards", "transitions"):
        _count(meta, meta_path, key)
    dt = meta.get("policy_dt_s")
    if (
        isinstance(dt, bool)
        or not isinstance(dt, int | float)
        or not math.isfinite(dt)
        or not 0.0 < dt <= 10.0
    ):
        got = "nothing (missing)" if "policy_dt_s" not in meta else _show(dt)
        raise UserError(f"{meta_path}: field 'policy_dt_s': expected a policy step in (0, 10] s, got {got}")
    vehicle = meta.get("vehicle")
    names = [f.name for f in fields(VehicleParams)]
    if not isinstance(vehicle, dict):
        got = "nothing (missing)" if "vehicle" not in meta else _show(vehicle)
        raise UserError(f"{meta_path}: field 'vehicle': expected an object of {', '.join(names)}, got {got}")
    for key in vehicle:
        if key not in names:
            raise UserError(f"{meta_path}: field 'vehicle.{key}': unknown; expected only {', '.join(names)}")
    for name in names:
        value = vehicle.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            got = "nothing (missing)" if name not in vehicle else _show(value)
            raise UserError(f"{meta_path}: field 'vehicle.{name}': expected a finite number, got {got}")
    try:
        params = VehicleParams(**{k: float(v) for k, v in vehicle.items()})
    except ValueError as exc:
        raise UserError(f"{meta_path}: field 'vehicle': {exc}") from None
    if "state_fields" in meta and meta["state_fields"] != list(STATE_FIELDS):
        raise UserError(
            f"{meta_path}: field 'state_fields': expected {_show(list(STATE_FIELDS), 200)}, "
            f"got {_show(meta['state_fields'])}"
        )
    engine = meta.get("engine")
    if engine is not None and not isinstance(engine, str):
        raise UserError(f"{meta_path}: field 'engine': expected an engine name, got {_show(engine)}")
    engine_spec(meta, meta_path)
    return params


def engine_spec(meta: dict[str, Any], meta_path: Path) -> EngineSpec | None:
    """The engine a dataset was recorded on: ``engine_spec`` of its ``meta.json`` (``meta_path``),
    or, for a dataset collected before that field, the older flat fields (``engine`` and its
    settings) when ``engine`` names a tier; ``None`` for other sources (logs, a bare engine).
    A spec that does not check is a ``UserError`` naming the file and field."""
    if meta.get("engine_spec") is not None:
        field, read = "engine_spec", lambda: EngineSpec.from_dict(meta["engine_spec"])
    elif meta.get("engine") in TIERS:
        field, read = "engine", lambda: EngineSpec.from_flat(meta)
    else:
        return None
    try:
        return read()
    except UserError as exc:
        raise UserError(f"{meta_path}: field '{field}': {exc}") from None


def _read_shard(path: Path) -> dict[str, np.ndarray]:
    """One ``.npz`` shard of plain arrays (``allow_pickle=False``: object arrays are refused)."""
    hint = "expected a .npz shard written by 'scenefactory collect'"
    key = ""
    try:
        if not zipfile.is_zipfile(path):
            what = "empty file" if path.stat().st_size == 0 else "unknown bytes"
            raise UserError(f"{path}: not a .npz archive ({what}; {hint})")
        out = {}
        with np.load(path, allow_pickle=False) as z:
            for key in z.files:
                out[key] = z[key]
        return out
    except UserError:
        raise
    except (
        OSError,
        ValueError,
        EOFError,
        KeyError,
        NotImplementedError,
        zipfile.BadZipFile,
        zlib.error,
    ) as exc:
        where = f"array '{key}': " if key else ""
        if isinstance(exc, ValueError) and "allow_pickle" in str(exc):
            raise UserError(
                f"{path}: not a readable dataset shard ({where}holds Python objects, refused: loading "
                "them could run code; expected plain numeric arrays)"
            ) from None
        msg = " ".join(str(exc).split())[:160]
        raise UserError(
            f"{path}: not a readable dataset shard ({where}{type(exc).__name__}: {msg}; {hint})"
        ) from None


def _check_shard(path: Path, arrays: dict[str, np.ndarray], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The known arrays of one shard, checked: present, shapes that agree, numbers, finite."""
    spec = {**ARRAYS, **OPTIONAL_ARRAYS}
    for key in keys:
        if key not in arrays:
            if key in ARRAYS:
                raise UserError(
                    f"{path}: array '{key}' is missing; expected a shard holding {', '.join(ARRAYS)}"
                )
            raise UserError(
                f"{path}: array '{key}' is missing; the dataset's first shard has it "
                "(expected in every shard)"
            )
    extra = [k for k in arrays if k in OPTIONAL_ARRAYS and k not in keys]
    if extra:
        raise UserError(
            f"{path}: array '{extra[0]}' is here but not in the dataset's first shard "
            "(expected in every shard or in none)"
        )
    rows = len(arrays["state"]) if arrays["state"].ndim else None  # N, if 'state' has one
    out = {}
    for key in keys:
        a = arrays[key]
        tail, kind = spec[key]
        shape = "(N,)" if not tail else f"(N, {', '.join(map(str, tail))})"
        if a.ndim != 1 + len(tail) or tuple(a.shape[1:]) != tail or len(a) != rows:
            n = f" with N = {rows} transitions (as 'state')" if rows is not None and key != "state" else ""
            raise UserError(f"{path}: array '{key}': expected shape {shape}{n}, got {tuple(a.shape)}")
        if kind == "i" and a.dtype.kind not in "iu":
            raise UserError(f"{path}: array '{key}': expected integers, got dtype {a.dtype}")
        if kind == "f":
            if a.dtype.kind not in "fiu":
                raise UserError(f"{path}: array '{key}': expected real numbers, got dtype {a.dtype}")
            bad = ~np.isfinite(a)
            if bad.any():
                where = np.argwhere(bad)[0]
                at = f"row {where[0]}" + (f", column {where[1]}" if len(where) > 1 else "")
                raise UserError(
                    f"{path}: array '{key}' holds {int(bad.sum())} non-finite values "
                    f"(first {a[tuple(where)]} at {at}); expected finite numbers"
                )
        out[key] = a
    friction = out["friction"]
    bad_mu = (friction <= 0.0) | (friction > MAX_FRICTION)
    if bad_mu.any():
        row = int(np.flatnonzero(bad_mu)[0])
        raise UserError(
            f"{path}: array 'friction': expected friction coefficients in (0, {MAX_FRICTION:g}], "
            f"got {float(friction[row]):g} at row {row}"
        )
    return out


def load_transitions(folder: Path, min_episodes: int = 0) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """All shards of a dataset folder concatenated, and its metadata.

    Everything is checked before it is returned, each problem a :class:`UserError` naming the file,
    field or array and what was expected: ``meta.json`` (an object of the right format, counts,
    ``policy_dt_s``, ``vehicle``), the shard files (as many as ``meta.json`` says, readable, each
    with the arrays of :data:`ARRAYS` — and the same :data:`OPTIONAL_ARRAYS` — of matching lengths,
    finite numbers), the total against ``meta.json``'s ``transitions``, and at least
    ``min_episodes`` episodes (the fits hold some out). Arrays other than these are left out.
    """
    meta = _read_meta(folder)
    meta_path = folder / "meta.json"
    _check_meta(meta, meta_path)
    files = sorted(p for p in folder.glob("shard_*.npz"))
    if len(files) != meta["shards"]:
        raise UserError(
            f"{folder}: {len(files)} shard files (shard_*.npz), but meta.json field 'shards' says "
            f"{meta['shards']}; expected them to match (a partly copied dataset?)"
        )
    parts: list[dict[str, np.ndarray]] = []
    keys: tuple[str, ...] = ()
    for path in files:
        arrays = _read_shard(path)
        if not parts:  # the first shard sets which optional arrays the dataset has
            keys = (*ARRAYS, *(k for k in OPTIONAL_ARRAYS if k in arrays))
        parts.append(_check_shard(path, arrays, keys))
    data = {k: np.concatenate([p[k] for p in parts]) for k in keys} if parts else {}
    total = len(data["state"]) if parts else 0
    if total != meta["transitions"]:
        raise UserError(
            f"{meta_path}: field 'transitions' says {meta['transitions']}, but the shards hold {total}; "
            "expected them to match (a partly copied or edited dataset?)"
        )
    if min_episodes > 0:
        episodes = len(np.unique(data["episode"])) if parts else 0
        if episodes < min_episodes:
            what = "no transitions" if total == 0 else f"{episodes} episode{'s' * (episodes != 1)}"
            raise UserError(
                f"{folder}: the dataset holds {what}; expected at least {min_episodes} episodes "
                "(whole episodes are held out to measure the fit)"
            )
    return data, meta
