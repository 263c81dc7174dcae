"""A self-contained HTML replay of recorded driving episodes: one file that opens from disk in any
browser, with no server and no network (the script and the data are inlined).

The page (``templates/replay.html``, plain canvas 2D) draws each world's map (lanes, road lines,
road edges, driveways, crosswalks, speed bumps, stop signs, signal stop points coloured by their
state at the step), the controlled agents coloured by status with their trails, routes and goals,
the logged objects by type and, when given, the human baseline's run of the same scene as ghost
outlines. It plays, pauses, steps, scrubs, changes speed, zooms, pans and switches worlds; a click
on an agent shows its speed, TTC, DRAC, reward, reward terms and status at that step and its
outcome.

The data is kept small: coordinates are centimetres as integers relative to the world's origin,
delta-encoded along each polyline and each trajectory (yaw in milliradians, unwrapped), other
per-step figures quantized to a stated unit; the JSON is gzipped and inlined as base64, and the
page inflates it with the browser's own ``DecompressionStream``. :func:`replay_payload` returns
the data before compression (what the tests read); :func:`write_html_replay` writes the file.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from scenefactory.evaluation.record import EpisodeRecord
from scenefactory.evaluation.render import _atomic_save, _check_episodes
from scenefactory.evaluation.render_scene import GOAL_RADIUS_M, SIGNAL_COLORS, STATUS_COLORS
from scenefactory.scenes.roadgraph import RoadEdgeType, RoadLineType
from scenefactory.scenes.scene import CAUTION_STATES, GO_STATES, STOP_STATES, Scene

__all__ = ["FORMAT_VERSION", "MAX_WORLDS", "replay_payload", "write_html_replay"]

FORMAT_VERSION = 1
"""Version of the data layout the page reads (``payload["version"]``)."""
MAX_WORLDS = 64
"""The most worlds one replay file holds (each world is one selectable episode)."""
DATA_MARK = "/*__SCENEFACTORY_REPLAY_DATA__*/"
"""Where the template takes the base64 data."""
OBJECT_KINDS = {1: "vehicle", 2: "pedestrian", 3: "cyclist"}
"""WOMD object type codes the page names (others: ``other``)."""
_YELLOW = {
    RoadLineType.BROKEN_SINGLE_YELLOW,
    RoadLineType.BROKEN_DOUBLE_YELLOW,
    RoadLineType.SOLID_SINGLE_YELLOW,
    RoadLineType.SOLID_DOUBLE_YELLOW,
    RoadLineType.PASSING_DOUBLE_YELLOW,
}
_BROKEN = {
    RoadLineType.BROKEN_SINGLE_WHITE,
    RoadLineType.BROKEN_SINGLE_YELLOW,
    RoadLineType.BROKEN_DOUBLE_YELLOW,
}
_DOUBLE = {
    RoadLineType.SOLID_DOUBLE_WHITE,
    RoadLineType.BROKEN_DOUBLE_YELLOW,
    RoadLineType.SOLID_DOUBLE_YELLOW,
    RoadLineType.PASSING_DOUBLE_YELLOW,
}


# ------------------------------------------------------------------------------------- encoding


def _q(a: np.ndarray, unit: float) -> np.ndarray:
    """``a`` in integer multiples of ``unit`` (int64; NaN must have been handled)."""
    return np.round(np.asarray(a, dtype=np.float64) / unit).astype(np.int64)


def _delta(q: np.ndarray) -> list[int]:
    """Delta-encode integers along the last axis (the first value kept), flattened row by row."""
    q = np.asarray(q, dtype=np.int64)
    if q.size == 0:
        return []
    d = np.diff(q, axis=-1, prepend=0)
    return [int(v) for v in d.reshape(-1)]


def _ints_or_null(a: np.ndarray, unit: float, inf: int | None = None) -> list[int | None]:
    """Quantized values, ``None`` for NaN, ``inf`` for ±inf (NaN-like ``None`` when not given)."""
    out: list[int | None] = []
    for v in np.asarray(a, dtype=np.float64).reshape(-1).tolist():
        if math.isnan(v):
            out.append(None)
        elif math.isinf(v):
            out.append(inf)
        else:
            out.append(round(v / unit))
    return out


def _polylines(polys: Sequence[np.ndarray], origin: np.ndarray) -> dict[str, list[int]]:
    """Polylines as ``n`` (points in each) and ``x``/``y`` (cm, delta-encoded along each polyline)."""
    polys = [np.asarray(p, dtype=np.float64).reshape(-1, 2) for p in polys]
    n = [len(p) for p in polys]
    if not polys or not sum(n):
        return {"n": n, "x": [], "y": []}
    q = [_q(p - origin, 0.01) for p in polys if len(p)]
    return {
        "n": n,
        "x": [v for p in q for v in _delta(p[:, 0])],
        "y": [v for p in q for v in _delta(p[:, 1])],
    }


def _track(a: np.ndarray, unit: float) -> list[int]:
    """``(T, N)`` per-step values of N things as ``N`` delta-encoded rows of T integers."""
    return _delta(_q(np.asarray(a).T, unit))


# ------------------------------------------------------------------------------------------ map


def _map(scene: Scene, origin: np.ndarray) -> dict[str, Any]:
    rg = scene.roadgraph
    widths = []
    for i in range(rg.num_lanes):
        w = rg.lane_width_m[i][rg.lane_valid[i]]
        widths.append(round(100 * float(np.mean(w))) if len(w) else 0)
    line_style = []
    for kind in rg.line_type.tolist():
        k = int(kind)
        color = "y" if k in _YELLOW else "u" if k == RoadLineType.UNKNOWN else "w"
        line_style.append(color + ("b" if k in _BROKEN else "s") + ("2" if k in _DOUBLE else "1"))
    return {
        "lanes": _polylines(rg.lanes(), origin),
        "lane_width": widths,
        "lines": _polylines(rg.lines(), origin),
        "line_style": line_style,
        "edges": _polylines(rg.edges(), origin),
        "edge_median": [int(int(k) == RoadEdgeType.MEDIAN) for k in rg.edge_type.tolist()],
        "crosswalks": _polylines(rg.crosswalks(), origin),
        "driveways": _polylines(rg.driveways(), origin),
        "speed_bumps": _polylines(rg.speed_bumps(), origin),
        "stop_signs": _polylines(list(rg.stop_sign_xy.reshape(-1, 1, 2)), origin),
    }


def _signals(scene: Scene, steps: int, dt_s: float, origin: np.ndarray) -> dict[str, Any] | None:
    """Signal stop points and, per step, one character per signal: r(ed), y(ellow), g(reen), u(nknown)."""
    sig = scene.signals
    if sig is None or not sig.num_signals:
        return None
    codes = sig.states_at(np.arange(steps), dt_s)
    table = np.full(max(int(codes.max(initial=0)) + 1, 9), "u")
    table[[int(c) for c in STOP_STATES]] = "r"
    table[[int(c) for c in CAUTION_STATES]] = "y"
    table[[int(c) for c in GO_STATES]] = "g"
    return {
        "xy": _polylines(list(sig.stop_xy.reshape(-1, 1, 2)), origin),
        "state": ["".join(table[row].tolist()) for row in codes],
    }


# --------------------------------------------------------------------------------------- agents


def _agents(ep: EpisodeRecord, origin: np.ndarray) -> dict[str, Any]:
    scene = ep.scene
    v = np.flatnonzero(scene.agent_valid)
    t = ep.num_steps
    pos = np.asarray(ep.pos_xy, dtype=np.float64)[:, v] - origin
    yaw = np.unwrap(np.asarray(ep.yaw, dtype=np.float64)[:, v], axis=0)
    status = np.asarray(ep.status)[:, v]
    out: dict[str, Any] = {
        "slot": v.tolist(),
        "length": _q(scene.length_m[v], 0.01).tolist(),
        "width": _q(scene.width_m[v], 0.01).tolist(),
        "goal": _polylines(list(scene.goal_xy[v].reshape(-1, 1, 2)), origin),
        "route": _polylines([scene.route(int(i)) for i in v], origin),
        "x": _track(pos[..., 0], 0.01),
        "y": _track(pos[..., 1], 0.01),
        "yaw": _track(yaw, 0.001),
        "speed": _track(np.nan_to_num(np.asarray(ep.speed, dtype=np.float64)[:, v]), 0.01),
        "status": ["".join(str(int(s)) for s in status[:, j]) for j in range(len(v))],
    }
    # per-step figures of the agent panel, (N rows of T): NaN -> null, inf TTC -> -1
    if ep.ttc_s is not None:
        out["ttc"] = _ints_or_null(np.asarray(ep.ttc_s)[:, v].T, 0.01, inf=-1)
    if ep.drac_mps2 is not None:
        out["drac"] = _ints_or_null(np.asarray(ep.drac_mps2)[:, v].T, 0.01)
    if ep.reward is not None:
        out["reward"] = _ints_or_null(np.asarray(ep.reward)[:, v].T, 0.001)
    if ep.reward_terms:
        out["terms"] = {
            name: _ints_or_null(np.asarray(a)[:, v].T, 0.001) for name, a in sorted(ep.reward_terms.items())
        }
    assert len(out["status"]) == len(v) and all(len(s) == t for s in out["status"])
    return out


def _objects(scene: Scene, steps: int, origin: np.ndarray) -> dict[str, Any] | None:
    """Logged objects over the episode's steps: each one's first step ``t0``, its steps ``n`` from
    there to its last valid one, ``x``/``y``/``yaw`` over those steps (an invalid step inside holds
    the last valid pose) and ``gap`` (a 0/1 string, empty when valid throughout)."""
    rep = scene.replay
    if rep is None or not rep.num_objects:
        return None
    valid = rep.valid[:, :steps]
    keep = np.flatnonzero(valid.any(axis=1))
    if not len(keep):
        return None
    obj: dict[str, Any] = {"kind": [], "length": [], "width": [], "t0": [], "n": [], "gap": []}
    xs, ys, yaws = [], [], []
    for i in keep.tolist():
        idx = np.flatnonzero(valid[i])
        t0, t1 = int(idx[0]), int(idx[-1]) + 1
        ok = valid[i, t0:t1]
        # hold the last valid pose through gaps
        fill = np.maximum.accumulate(np.where(ok, np.arange(t1 - t0), 0))
        xy = rep.xy[i, t0:t1][fill] - origin
        yaw = np.unwrap(rep.yaw[i, t0:t1][fill])
        kind = int(rep.kind[i])
        obj["kind"].append(OBJECT_KINDS.get(kind, "other"))
        obj["length"].append(round(100 * float(rep.length_m[i])))
        obj["width"].append(round(100 * float(rep.width_m[i])))
        obj["t0"].append(t0)
        obj["n"].append(t1 - t0)
        obj["gap"].append("" if ok.all() else "".join("1" if b else "0" for b in ok.tolist()))
        xs += _delta(_q(xy[:, 0], 0.01))
        ys += _delta(_q(xy[:, 1], 0.01))
        yaws += _delta(_q(yaw, 0.001))
    obj.update({"x": xs, "y": ys, "yaw": yaws})
    return obj


# -------------------------------------------------------------------------------------- payload


def _origin(scene: Scene) -> np.ndarray:
    xmin, ymin, _, _ = scene.roadgraph.bounds()
    return np.array([math.floor(xmin), math.floor(ymin)], dtype=np.float64)


def _world(ep: EpisodeRecord, baseline: EpisodeRecord | None) -> dict[str, Any]:
    scene = ep.scene
    origin = _origin(scene)
    xmin, ymin, xmax, ymax = scene.roadgraph.bounds()
    world: dict[str, Any] = {
        "title": ep.title or scene.name,
        "scene": scene.name,
        "origin_m": origin.tolist(),
        "bounds_cm": _q(np.array([xmin, ymin, xmax, ymax]) - np.tile(origin, 2), 0.01).tolist(),
        "steps": ep.num_steps,
        "dt_s": float(ep.dt_s),
        "map": _map(scene, origin),
        "signals": _signals(scene, ep.num_steps, float(ep.dt_s), origin),
        "agents": _agents(ep, origin),
        "objects": _objects(scene, ep.num_steps, origin),
        "baseline": None,
    }
    if baseline is not None:
        if baseline.scene.name != scene.name:
            raise ValueError(
                f"html replay: the baseline of world '{world['title']}' plays scene "
                f"'{baseline.scene.name}', expected '{scene.name}'"
            )
        b = _agents(baseline, origin)
        world["baseline"] = {k: b[k] for k in ("slot", "length", "width", "x", "y", "yaw", "status")}
        world["baseline"]["steps"] = baseline.num_steps
    return world


def replay_payload(
    episodes: Sequence[EpisodeRecord],
    baseline: Sequence[EpisodeRecord | None] | None = None,
    title: str = "",
    info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The replay's data (before compression): one world per episode, in order.

    Args:
        episodes: recorded episodes (1 … :data:`MAX_WORLDS`).
        baseline: for each episode, the human baseline's recording of the same scene or ``None``
            (the list as long as ``episodes``); ``None``: no baseline anywhere.
        title: the page's title.
        info: figures shown under the title (e.g. the policy, the engine), JSON-serializable.
    """
    eps = list(episodes)
    if not 1 <= len(eps) <= MAX_WORLDS:
        raise ValueError(f"html replay: expected 1 to {MAX_WORLDS} episodes, got {len(eps)}")
    _check_episodes(eps)
    base = list(baseline) if baseline is not None else [None] * len(eps)
    if len(base) != len(eps):
        raise ValueError(f"html replay: {len(base)} baseline entries for {len(eps)} episodes")
    return {
        "version": FORMAT_VERSION,
        "title": title or "scenefactory replay",
        "info": dict(info or {}),
        "units": {"xy": "cm", "yaw": "mrad", "speed": "cm/s", "ttc": "cs", "drac": "cm/s2", "reward": "1e-3"},
        "status": [{"code": int(s), "name": s.name.lower(), "color": c} for s, c in STATUS_COLORS.items()],
        "signal_colors": {k[0]: v for k, v in SIGNAL_COLORS.items()},
        "goal_radius_m": GOAL_RADIUS_M,
        "worlds": [_world(ep, b) for ep, b in zip(eps, base, strict=True)],
    }


def _template() -> str:
    return resources.files("scenefactory.evaluation").joinpath("templates/replay.html").read_text("utf-8")


def encode_payload(payload: Mapping[str, Any]) -> str:
    """The payload as the page reads it: compact JSON, gzipped, base64 (ASCII)."""
    raw = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def write_html_replay(
    episodes: Sequence[EpisodeRecord],
    path: str | os.PathLike[str],
    baseline: Sequence[EpisodeRecord | None] | None = None,
    title: str = "",
    info: Mapping[str, Any] | None = None,
) -> Path:
    """Write the replay page of ``episodes`` to ``path`` (atomically); returns ``path``. Arguments as
    in :func:`replay_payload`."""
    page = _template()
    if page.count(DATA_MARK) != 1:
        raise RuntimeError(f"the replay template must hold {DATA_MARK} exactly once")
    data = encode_payload(replay_payload(episodes, baseline, title, info))
    html = page.replace(DATA_MARK, data)
    out = _atomic_save(Path(path), lambda tmp: Path(tmp).write_text(html, encoding="utf-8"))
    umask = os.umask(0)
    os.umask(umask)
    out.chmod(0o666 & ~umask)  # a page to share: readable as any file the user writes (mkstemp's is 0600)
    return out
