"""Open-loop replay of driving logs on an engine: how far the simulated cars drift from the logged
ones (the ``log-grounding`` experiment's measurement), as a typed :class:`Divergence`.

Each logged agent starts at its logged spawn state and receives, step after step, the actions the
kinematic tier's inverse infers from its log; the divergence at step t is the distance between
the simulated and the logged position. An agent counts while its log is unbroken from the spawn
(the first unobserved step ends it) and until it hits another car (on engines with a contact
model: from there on it no longer follows its log).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from scenefactory.dynamics.bicycle import inverse_bicycle
from scenefactory.engines.base import Engine
from scenefactory.errors import UserError
from scenefactory.evaluation.plots import save_png
from scenefactory.experiments.results import Reader
from scenefactory.scenes.scene import Scene
from scenefactory.stats import mean_interval
from scenefactory.vehicles.params import VehicleParams

HORIZONS_S = (1.0, 3.0, 5.0, 8.0)
"""Seconds into the replay at which the divergence is reported (FDE)."""
MAX_AGENTS = 32
"""Most agents of a scene replayed (and controlled by the logged drivers)."""

EngineMaker = Callable[[int, int, float, VehicleParams], Engine]
"""``(worlds, agents per world, policy step dt [s], vehicle) → Engine``: how an engine under test
is built; a corrected (grounded) abstract engine is one of these."""


@dataclass(frozen=True)
class HorizonDivergence:
    """The mean divergence ``horizon_s`` seconds into the replay [m], its 95 % interval, over the
    ``agents`` whose log reaches that far."""

    horizon_s: float
    mean_m: float
    ci95: tuple[float, float]
    agents: int

    def to_json(self) -> dict[str, Any]:
        """Plain data: the fields by name."""
        return {
            "horizon_s": self.horizon_s,
            "mean_m": self.mean_m,
            "ci95": list(self.ci95),
            "agents": self.agents,
        }

    @classmethod
    def from_json(cls, r: Reader) -> HorizonDivergence:
        """Inverse of :meth:`to_json`."""
        return cls(r.number("horizon_s"), r.number("mean_m"), r.interval("ci95"), r.integer("agents"))


@dataclass(frozen=True)
class DivergenceCurve:
    """Per replay step (T,): its time ``t_s``, the mean divergence [m] with its 95 % band, and the
    agents counted."""

    t_s: tuple[float, ...]
    mean_m: tuple[float, ...]
    ci95_low: tuple[float, ...]
    ci95_high: tuple[float, ...]
    agents: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain data: the fields by name, one list each."""
        return {
            "t_s": list(self.t_s),
            "mean_m": list(self.mean_m),
            "ci95_low": list(self.ci95_low),
            "ci95_high": list(self.ci95_high),
            "agents": list(self.agents),
        }

    @classmethod
    def from_json(cls, r: Reader) -> DivergenceCurve:
        """Inverse of :meth:`to_json`."""
        return cls(
            r.numbers("t_s"),
            r.numbers("mean_m"),
            r.numbers("ci95_low"),
            r.numbers("ci95_high"),
            r.integers("agents"),
        )


@dataclass(frozen=True)
class Divergence:
    """An engine's open-loop replay of held-out logs: the ``scenes`` replayed, ``logged_agents``
    (agents with a log at the spawn), ``agents`` (those with at least one counted step),
    ``ended_by_contact`` (how many hit another car), the mean divergence over each agent's unbroken
    logged steps then over agents (``ade_m``, with its 95 % interval), the divergence at each of
    :data:`HORIZONS_S` (``fde``) and over time (``curve``)."""

    scenes: int
    logged_agents: int
    agents: int
    ended_by_contact: int
    ade_m: float
    ade_m_ci95: tuple[float, float]
    fde: tuple[HorizonDivergence, ...]
    curve: DivergenceCurve

    def to_json(self) -> dict[str, Any]:
        """Plain data: the fields by name."""
        return {
            "scenes": self.scenes,
            "logged_agents": self.logged_agents,
            "agents": self.agents,
            "ended_by_contact": self.ended_by_contact,
            "ade_m": self.ade_m,
            "ade_m_ci95": list(self.ade_m_ci95),
            "fde": [h.to_json() for h in self.fde],
            "curve": self.curve.to_json(),
        }

    @classmethod
    def from_json(cls, r: Reader) -> Divergence:
        """Inverse of :meth:`to_json`."""
        return cls(
            scenes=r.integer("scenes"),
            logged_agents=r.integer("logged_agents"),
            agents=r.integer("agents"),
            ended_by_contact=r.integer("ended_by_contact"),
            ade_m=r.number("ade_m"),
            ade_m_ci95=r.interval("ade_m_ci95"),
            fde=r.objects("fde", HorizonDivergence.from_json),
            curve=DivergenceCurve.from_json(r.obj("curve")),
        )

    def at(self, horizon_s: float) -> HorizonDivergence:
        """The divergence ``horizon_s`` seconds in; ``KeyError`` when it was not measured."""
        for h in self.fde:
            if h.horizon_s == horizon_s:
                return h
        raise KeyError(f"no divergence at {horizon_s} s (measured at {[h.horizon_s for h in self.fde]})")


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
) -> Divergence:
    """Open-loop replay of the scenes' logs on the engine ``make`` builds (see the module
    docstring and :class:`Divergence`). An agent's replay ends before its first contact with
    another car (engines with a contact model). Scenes without a log are skipped; logs must be
    sampled at ``dt``."""
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
    m, lo_, hi = mean_interval(torch.as_tensor(ade_all))
    steps_flat = [np.concatenate(p) if p else np.zeros(0) for p in per_step]
    fde = []
    for h in horizons_s:
        s = round(h / dt)
        vals = steps_flat[s] if s < len(steps_flat) else np.zeros(0)
        fm, flo, fhi = mean_interval(torch.as_tensor(vals))
        fde.append(HorizonDivergence(float(h), fm, (flo, fhi), len(vals)))
    curve = [mean_interval(torch.as_tensor(v)) for v in steps_flat]
    return Divergence(
        scenes=len(logged),
        logged_agents=logged_agents,
        agents=len(ade_all),
        ended_by_contact=collided,
        ade_m=m,
        ade_m_ci95=(lo_, hi),
        fde=tuple(fde),
        curve=DivergenceCurve(
            t_s=tuple(s * dt for s in range(len(steps_flat))),
            mean_m=tuple(c[0] for c in curve),
            ci95_low=tuple(c[1] for c in curve),
            ci95_high=tuple(c[2] for c in curve),
            agents=tuple(len(v) for v in steps_flat),
        ),
    )


def plot_curves(results: Mapping[str, Divergence], path: Path, title: str) -> Path:
    """Divergence from the log over time, one line (with its 95 % band) per engine."""
    fig = Figure(figsize=(7.5, 4.2), facecolor="white")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for name, r in results.items():
        c = r.curve
        t, mean = np.array(c.t_s), np.array(c.mean_m, dtype=float)
        lo, hi = np.array(c.ci95_low, dtype=float), np.array(c.ci95_high, dtype=float)
        (line,) = ax.plot(t, mean, lw=1.8, label=f"{name} (ADE {r.ade_m:.2f} m)")
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
