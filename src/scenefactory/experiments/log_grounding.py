"""``log-grounding``: how far does an engine drift from real driving when it replays logged actions?

The data path and the measurement of grounding on real logs: every grounding method of
:data:`CORRECTIONS` is fitted on the training logs and replayed like the engines.

1. The converted scenes of ``--scenes DIR`` (WOMD, ``scenefactory convert``) that carry driving
   logs are split by scene with a seeded permutation: :data:`HOLDOUT_FRAC` held out, the rest
   for fitting. Both parts are written as transition datasets (``train_transitions/``,
   ``heldout_transitions/``; :mod:`scenefactory.grounding.log_dataset`).
2. Every engine under test replays the held-out logs open loop (:func:`log_divergence`): each
   logged agent starts at its logged spawn state and receives, step after step, the actions the
   kinematic tier's inverse infers from its log; the divergence at step t is the distance between
   the simulated and the logged position. An agent counts while its log is unbroken from the spawn
   (the first unobserved step ends it) and until it hits another car (on engines with a contact
   model: from there on it no longer follows its log).
3. Reported per engine: mean divergence over the replay (ADE) and the divergence at
   :data:`HORIZONS_S` (FDE), with 95 % CIs over agents, and the divergence curve over time.
4. The human baseline on the reference engines (:func:`logged_drivers`; the tiers policies are
   scored on): the held-out scenes' logged drivers closed loop
   (:mod:`scenefactory.evaluation.human`) — goal reach, collision, off-road, time-out, near miss,
   TTC, DRAC (and any rate the metrics add, e.g. red-light violations) — and which logged objects
   were controlled, replayed and left out, and why.

The engines: the uncorrected kinematic tier (the abstract simulator to be grounded) and the
mujoco tier (for reference), then one row per correction in ``CORRECTIONS`` — a function from the
training transitions to an :data:`EngineMaker`: each grounding method (``dr``, ``sysid``,
``markov``, ``gat``, ``history``) fitted by :func:`~scenefactory.grounding.ground.ground` on all
the training transitions and run as the grounded engine (:func:`grounding_correction`; smaller
fits with ``--quick``). Its row against the uncorrected kinematic one is the divergence before and
after the correction.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.dynamics.bicycle import inverse_bicycle
from scenefactory.dynamics.correctors import Method
from scenefactory.engines.base import Engine
from scenefactory.errors import UserError
from scenefactory.evaluation.human import agent_counts, describe_counts, human_baseline, replay_beyond
from scenefactory.experiments.base import Experiment, ExperimentArgs, console
from scenefactory.experiments.report import markdown_table, metrics_table, write_report
from scenefactory.grounding.ground import GroundConfig
from scenefactory.scenes.scene import Scene
from scenefactory.stats import mean_interval
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.vehicles.params import VehicleParams

NAME = "log-grounding"
HOLDOUT_FRAC = 0.5
HORIZONS_S = (1.0, 3.0, 5.0, 8.0)
QUICK_MAX_SCENES = 40
MAX_AGENTS = 32

EngineMaker = Callable[[int, int, float, VehicleParams], Engine]
"""``(worlds, agents per world, policy step dt [s], vehicle) → Engine``: how an engine under test
is built; a corrected (grounded) abstract engine is one of these."""

Correction = Callable[[Path, VehicleParams, float], EngineMaker]
"""``(training transitions folder, vehicle, dt [s]) → EngineMaker``: a grounding method fitted on
the logged transitions of the training scenes."""


def grounding_correction(cfg: GroundConfig) -> Correction:
    """The correction of ``cfg.method``: :func:`~scenefactory.grounding.ground.ground` fits it on
    the training transitions (at most ``cfg.budget`` of them, ``None``: all but the fit's held-out
    episodes) into ``<transitions folder>/../groundings/<method>/``, and every engine it makes is a
    :class:`~scenefactory.engines.grounded.GroundedEngine` running that artifact (CPU)."""

    def correct(data: Path, params: VehicleParams, dt: float) -> EngineMaker:
        from scenefactory.grounding.ground import ground

        t0 = time.perf_counter()
        res = ground(data, cfg, data.parent / "groundings" / cfg.method.value)
        console.print(
            f"  grounding {cfg.method.value}: fitted on {res.config['budget_transitions']} logged "
            f"transitions ({time.perf_counter() - t0:.0f} s)"
        )

        def make(worlds: int, agents: int, dt: float, params: VehicleParams) -> Engine:
            from scenefactory.engines.grounded import GroundedEngine

            return GroundedEngine(worlds, agents, dt, params, torch.device("cpu"), res.out_dir)

        return make

    return correct


CORRECTED = tuple(m for m in Method if m is not Method.NONE)
"""The methods compared (``none`` is the uncorrected kinematic row already)."""
CORRECTIONS: dict[str, Correction] = {
    m.value: grounding_correction(GroundConfig(method=m)) for m in CORRECTED
}
"""Grounding methods compared by this experiment (name → correction), with ``scenefactory
ground``'s default settings and every training transition."""
QUICK_CORRECTIONS: dict[str, Correction] = {
    m.value: grounding_correction(
        GroundConfig(method=m, train_steps=200, sysid_iterations=20, gat_sim_transitions=2000)
    )
    for m in CORRECTED
}
"""The same with smaller fits (``--quick``)."""


def _kinematic(worlds: int, agents: int, dt: float, params: VehicleParams) -> Engine:
    from scenefactory.engines.kinematic import KinematicEngine

    return KinematicEngine(worlds, agents, dt=dt, params=params)


def _mujoco(worlds: int, agents: int, dt: float, params: VehicleParams) -> Engine:
    from scenefactory.engines import make_engine

    return make_engine("mujoco", worlds, agents, dt=dt, params=params)


REFERENCE_ENGINES: dict[str, EngineMaker] = {
    "kinematic (uncorrected)": _kinematic,
    "mujoco (physics tier)": _mujoco,
}


def _padded_logs(
    chunk: Sequence[Scene], k: int, t: int, params: VehicleParams, dt: float
) -> dict[str, np.ndarray]:
    """Logs of a batch of scenes padded to (W, k, t, ...), with the unbroken-from-spawn mask and
    the inverse-kinematic actions."""
    w = len(chunk)
    xy, yaw, speed = np.zeros((w, k, t, 2)), np.zeros((w, k, t)), np.zeros((w, k, t))
    valid = np.zeros((w, k, t), dtype=bool)
    for i, sc in enumerate(chunk):
        log = sc.log
        assert log is not None
        n, steps = min(k, sc.max_agents), log.num_steps
        xy[i, :n, :steps], yaw[i, :n, :steps], speed[i, :n, :steps] = log.xy[:n], log.yaw[:n], log.speed[:n]
        valid[i, :n, :steps] = log.valid[:n] & sc.agent_valid[:n, None]
    actions, _ = inverse_bicycle(yaw, speed, valid, dt, params)
    alive = np.cumprod(valid, axis=-1).astype(bool)
    return {"xy": xy, "yaw": yaw, "speed": speed, "alive": alive, "actions": actions}


def log_divergence(
    make: EngineMaker,
    scenes: Sequence[Scene],
    params: VehicleParams | None = None,
    dt: float = 0.1,
    horizons_s: Sequence[float] = HORIZONS_S,
    batch_worlds: int = 32,
) -> dict[str, Any]:
    """Open-loop replay of the scenes' logs on the engine ``make`` builds (see the module docstring).

    An agent's replay ends before its first contact with another car (engines with a contact
    model): from there on it no longer follows its log. Returns ``logged_agents`` (agents with a
    log at the spawn), ``agents`` (those with at least one counted step), ``ended_by_contact`` (how
    many hit another car), ``ade_m`` (mean over each agent's unbroken logged
    steps, then over agents), ``fde_<h>s_m`` (divergence at ``h`` seconds, over agents whose log
    reaches it) — each with ``*_ci95`` — and ``curve`` (mean divergence, its 95 % band and count per
    step). Scenes without a log are skipped; logs must be sampled at ``dt``.
    """
    params = params or VehicleParams()
    logged = [sc for sc in scenes if sc.log is not None]
    for sc in logged:
        assert sc.log is not None
        if abs(sc.log.dt_s - dt) > 1e-9:
            raise UserError(
                f"scene '{sc.name}': log step {sc.log.dt_s} s differs from the engine step {dt} s"
            )
    t_max = max([sc.log.num_steps for sc in logged if sc.log is not None] + [1])
    per_step: list[list[np.ndarray]] = [[] for _ in range(t_max)]
    ade: list[np.ndarray] = []
    collided = logged_agents = 0
    for lo in range(0, len(logged), batch_worlds):
        chunk = logged[lo : lo + batch_worlds]
        k = min(MAX_AGENTS, max(sc.max_agents for sc in chunk))
        t = max(sc.log.num_steps for sc in chunk if sc.log is not None)
        d = _padded_logs(chunk, k, t, params, dt)
        w, alive = len(chunk), d["alive"].copy()
        engine = make(w, k, dt, params)
        ids = torch.arange(w)
        pose = torch.as_tensor(
            np.concatenate((d["xy"][:, :, 0], d["yaw"][:, :, 0, None]), -1), dtype=torch.float32
        )
        engine.reset(
            ids,
            pose,
            torch.as_tensor(d["speed"][:, :, 0], dtype=torch.float32),
            torch.as_tensor(alive[:, :, 0]),
        )
        engine.set_friction(ids, torch.tensor([sc.friction for sc in chunk], dtype=torch.float32))
        err = np.full((w, k, t), np.nan)
        err[:, :, 0] = np.where(alive[:, :, 0], 0.0, np.nan)
        with torch.inference_mode():
            for s in range(t - 1):
                act = torch.as_tensor(d["actions"][:, :, s], dtype=torch.float32)
                st = engine.step(act, torch.as_tensor(alive[:, :, s + 1]))
                e = np.linalg.norm(st.pos_xy.numpy().astype(np.float64) - d["xy"][:, :, s + 1], axis=-1)
                contacts = engine.collisions()
                if contacts is not None:  # a car that hits another one no longer follows its log:
                    hit = contacts.cpu().numpy().astype(bool) & alive[:, :, s + 1]
                    alive[:, :, s + 1 :] &= ~hit[:, :, None]  # its replay ends before the contact
                    collided += int(hit.sum())
                err[:, :, s + 1] = np.where(alive[:, :, s + 1], e, np.nan)
        logged_agents += int(d["alive"][:, :, 0].sum())
        replayed = alive[:, :, 1] if t > 1 else np.zeros((w, k), dtype=bool)  # ≥ 1 counted step
        ade.append(np.nanmean(err[replayed][:, 1:], axis=-1) if replayed.any() else np.zeros(0))
        for s in range(t):
            col = err[:, :, s][alive[:, :, s] & replayed]
            per_step[s].append(col)
    ade_all = np.concatenate(ade) if ade else np.zeros(0)
    out: dict[str, Any] = {
        "agents": len(ade_all),
        "logged_agents": logged_agents,
        "ended_by_contact": collided,
        "scenes": len(logged),
    }
    m, lo_, hi = mean_interval(torch.as_tensor(ade_all))
    out["ade_m"], out["ade_m_ci95"] = m, [lo_, hi]
    steps_flat = [np.concatenate(p) if p else np.zeros(0) for p in per_step]
    for h in horizons_s:
        s = round(h / dt)
        vals = steps_flat[s] if s < len(steps_flat) else np.zeros(0)
        m, lo_, hi = mean_interval(torch.as_tensor(vals))
        key = f"fde_{h:g}s_m"
        out[key], out[f"{key}_ci95"], out[f"{key}_agents"] = m, [lo_, hi], len(vals)
    curve = [mean_interval(torch.as_tensor(v)) for v in steps_flat]
    out["curve"] = {
        "t_s": [s * dt for s in range(len(steps_flat))],
        "mean_m": [c[0] for c in curve],
        "ci95_low": [c[1] for c in curve],
        "ci95_high": [c[2] for c in curve],
        "agents": [len(v) for v in steps_flat],
    }
    return out


HUMAN_KEYS = (
    "goal_reach_rate",
    "collision_rate",
    "offroad_rate",
    "red_light_violation_rate",
    "timeout_rate",
    "near_miss_rate",
    "min_ttc_s",
    "mean_peak_drac_mps2",
    "log_divergence_m",
)
"""Figures of the human-baseline table (those the metrics lack are left out)."""
HUMAN_WORLDS = 32
"""Worlds run at once for the human baseline."""


def logged_drivers(
    engines: Mapping[str, EngineMaker], scenes: Sequence[Scene], params: VehicleParams, dt: float, seed: int
) -> dict[str, Any]:
    """The human baseline on every engine: ``{"engines": {name: metrics}, "agents": counts}`` of the
    scenes' logged drivers closed loop (``evaluation.human``), K = the most agents any scene
    controls (at most :data:`MAX_AGENTS`; the others replay their logs)."""
    k = max(1, min(MAX_AGENTS, max(sc.num_agents for sc in scenes)))
    fitted = [replay_beyond(sc, k) for sc in scenes]
    w = min(HUMAN_WORLDS, len(fitted))
    task = replace(DrivingTaskConfig(num_worlds=w, agents_per_world=k), dt_s=dt)
    out = {
        name: human_baseline(task, fitted, make(w, k, dt, params), w, seed) for name, make in engines.items()
    }
    return {"engines": out, "agents": agent_counts(scenes, k)}


def split_scenes(scenes: Sequence[Scene], holdout_frac: float, seed: int) -> tuple[list[Scene], list[Scene]]:
    """``(train, held_out)``: a seeded permutation holds out ``round(frac · n)`` scenes (≥ 1, and
    at least one is left to train on)."""
    n = len(scenes)
    k = min(max(1, round(holdout_frac * n)), n - 1)
    order = np.random.default_rng(seed).permutation(n)
    held = set(order[:k].tolist())
    return [s for i, s in enumerate(scenes) if i not in held], [s for i, s in enumerate(scenes) if i in held]


def plot_curves(results: Mapping[str, Mapping[str, Any]], path: Path, title: str) -> Path:
    """Divergence from the log over time, one line (with its 95 % band) per engine."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from scenefactory.evaluation.plots import save_png

    fig = Figure(figsize=(7.5, 4.2), facecolor="white")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for name, r in results.items():
        c = r["curve"]
        t, mean = np.array(c["t_s"]), np.array(c["mean_m"], dtype=float)
        lo, hi = np.array(c["ci95_low"], dtype=float), np.array(c["ci95_high"], dtype=float)
        (line,) = ax.plot(t, mean, lw=1.8, label=f"{name} (ADE {r['ade_m']:.2f} m)")
        ax.fill_between(t, np.maximum(lo, 0.0), hi, color=line.get_color(), alpha=0.2, lw=0)
    ax.set_xlabel("time since the start of the replay [s]")
    ax.set_ylabel("distance from the logged position [m]")
    ax.set_ylim(bottom=0.0)
    ax.grid(color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return save_png(fig, path, dpi=110)


def run(args: ExperimentArgs, corrections: Mapping[str, Correction] | None = None) -> dict[str, Any]:
    """Run the experiment; writes the report folder and returns ``results.json``'s document."""
    from scenefactory.grounding.log_dataset import write_log_dataset
    from scenefactory.scenes.library import load_scene_dir

    t0 = time.perf_counter()
    if corrections is None:
        corrections = QUICK_CORRECTIONS if args.quick else CORRECTIONS
    if args.scenes_dir is None:
        raise UserError(f"experiment {NAME} needs --scenes DIR (scene JSON converted from driving logs)")
    args.checkpoints_by_kind(())  # takes no checkpoints: refuse any
    scenes = [sc for sc in load_scene_dir(args.scenes_dir) if sc.log is not None]
    if args.quick:
        scenes = scenes[:QUICK_MAX_SCENES]
    if len(scenes) < 2:
        raise UserError(
            f"experiment {NAME} needs at least 2 scenes with driving logs in {args.scenes_dir}, "
            f"found {len(scenes)}"
        )
    train, held = split_scenes(scenes, HOLDOUT_FRAC, args.seed)
    if args.episodes is not None:
        held = held[: args.episodes]
    params = VehicleParams()
    dt = float(scenes[0].log.dt_s) if scenes[0].log is not None else 0.1
    source = str(args.scenes_dir)
    train_dir, held_dir = args.out / "train_transitions", args.out / "heldout_transitions"
    train_meta = write_log_dataset(train, train_dir, source=source, params=params)
    held_meta = write_log_dataset(held, held_dir, source=source, params=params)
    engines: dict[str, EngineMaker] = dict(REFERENCE_ENGINES)
    for name, correct in corrections.items():
        engines[f"kinematic + {name}"] = correct(train_dir, params, dt)
    results = {}
    for name, make in engines.items():
        t1 = time.perf_counter()
        results[name] = log_divergence(make, held, params, dt)
        console.print(
            f"  {name}: ADE {results[name]['ade_m']:.3f} m over {results[name]['agents']} logged agents "
            f"({time.perf_counter() - t1:.0f} s)"
        )
    t1 = time.perf_counter()
    humans = logged_drivers(REFERENCE_ENGINES, held, params, dt, args.seed)
    console.print(
        "  logged drivers: goal "
        + ", ".join(f"{n} {m['goal_reach_rate']:.3f}" for n, m in humans["engines"].items())
        + f" ({time.perf_counter() - t1:.0f} s)"
    )
    fde_keys = [f"fde_{h:g}s_m" for h in HORIZONS_S]

    def cell(r: Mapping[str, Any], key: str) -> str:
        v, (lo, hi) = r[key], r[f"{key}_ci95"]
        return "n/a" if not math.isfinite(v) else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"

    table = markdown_table(
        [
            "engine",
            "ADE (m)",
            *(f"at {h:g} s (m)" for h in HORIZONS_S),
            "agents counted / logged",
            "hit a car",
        ],
        [
            [
                n,
                cell(r, "ade_m"),
                *(cell(r, k) for k in fde_keys),
                f"{r['agents']} / {r['logged_agents']}",
                str(r["ended_by_contact"]),
            ]
            for n, r in results.items()
        ],
    )
    plot = plot_curves(
        results, args.out / "log_divergence.png", f"{NAME}: open-loop replay of {len(held)} held-out logs"
    )
    pending = (
        (
            f"\nEach correction ({', '.join(corrections)}) is a grounding method fitted on the training "
            "transitions (`scenefactory ground`, folders in `groundings/`) and run as the grounded engine: "
            "compare its row (after) with the uncorrected kinematic row (before).\n"
        )
        if corrections
        else "\nNo correction: the rows are the uncorrected kinematic tier and the mujoco tier.\n"
    )
    human_keys = [k for k in HUMAN_KEYS if any(k in m for m in humans["engines"].values())]
    human_table = metrics_table(["engine"], [([n], m) for n, m in humans["engines"].items()], human_keys)
    human_section = (
        "## Logged drivers on the reference engines (human baseline, held-out scenes)\n\n"
        "The held-out scenes' own drivers, closed loop: each step the action that takes the car "
        "from its current state onto its log. On real logs they should reach ≥ 0.97 of their goals "
        "with ≤ 0.01 collision and off-road on every engine; a shortfall is the simulator's, not a "
        f"policy's.\n\n{human_table}\nAgents: {describe_counts(humans['agents'])}.\n"
    )
    intro = f"""
{len(scenes)} converted scenes with driving logs from `{source}`, split by scene (seed {args.seed}):
{len(train)} for fitting ({train_meta["transitions"]} logged transitions in `train_transitions/`),
{len(held)} held out ({held_meta["transitions"]} in `heldout_transitions/`). Each engine replays the
held-out logs open loop with the actions the kinematic inverse infers from them; the divergence is
the distance between the simulated and the logged position (while the log is unbroken).
{pending}"""
    return write_report(
        args,
        NAME,
        "Log grounding: divergence from real driving logs",
        intro,
        ["## Divergence from the logs (held-out scenes)\n\n" + table, human_section],
        None,
        {"split": f"seed {args.seed}, {HOLDOUT_FRAC:g} held out", "training": "none (no policy is trained)"},
        {
            "scenes_dir": source,
            "holdout_frac": HOLDOUT_FRAC,
            "horizons_s": list(HORIZONS_S),
            "dt_s": dt,
            "train_scenes": [s.name for s in train],
            "heldout_scenes": [s.name for s in held],
            "engines": list(engines),
            "corrections": list(corrections),
        },
        {"engines": results, "human_baseline": humans["engines"], "agents": humans["agents"]},
        [plot],
        time.perf_counter() - t0,
    )


EXPERIMENT = Experiment(
    NAME, "open-loop divergence of engines from held-out driving logs (needs --scenes)", (), run
)
