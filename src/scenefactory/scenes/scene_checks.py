"""Checks of a scene as a whole: what each number's bound cannot see.

:func:`check_scene` refuses (``SceneFormatError`` naming the file and the field) what
:data:`~scenefactory.scenes.plausibility.REFUSED` lists; :func:`scene_warnings` counts what
:data:`~scenefactory.scenes.plausibility.WARNED` lists, which real data holds and the tools run on.
:func:`json_depth` measures a JSON text's nesting before it is parsed. All are pure functions of a
scene (or a text) and cost O(agents² + objects × agents × steps) in numpy, pairs first filtered by
the distance of their centres.
"""

from __future__ import annotations

import numpy as np

from scenefactory.errors import SceneFormatError
from scenefactory.scenes.friction import SURFACE_NAMES, SURFACES
from scenefactory.scenes.plausibility import (
    CURRENT_TIME_INDEX,
    MAX_JSON_DEPTH,
    MAX_LOG_STEPS,
    MAX_SCENE_EXTENT_M,
    WARNED,
)
from scenefactory.scenes.scene import Scene

_OPEN, _CLOSE = np.frombuffer(b"[{", dtype=np.uint8), np.frombuffer(b"]}", dtype=np.uint8)


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON ``text``, brackets inside strings not counted
    (vectorized: the text is scanned as bytes, string contents masked by their unescaped quotes)."""
    raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    if raw.size == 0:
        return 0
    quote = raw == ord('"')
    if quote.any():
        # a quote is escaped when an odd run of backslashes precedes it
        back = raw == ord("\\")
        idx = np.flatnonzero(quote)
        # length of the backslash run ending at each position (cumulative count reset at non-backslash)
        c = np.cumsum(back)
        reset = np.maximum.accumulate(np.where(~back, c, 0))
        run = c - reset
        before = np.where(idx > 0, run[np.maximum(idx - 1, 0)], 0)
        real = np.zeros(raw.size, dtype=bool)
        real[idx[before % 2 == 0]] = True
        inside = (np.cumsum(real) % 2 == 1) & ~real
    else:
        inside = np.zeros(raw.size, dtype=bool)
    step = np.isin(raw, _OPEN).astype(np.int64) - np.isin(raw, _CLOSE).astype(np.int64)
    step[inside] = 0
    return int(np.cumsum(step).max(initial=0))


def value_depth(value: object) -> int:
    """The nesting depth of a parsed JSON value (lists and dicts), walked without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, list | dict):
            deepest = max(deepest, d)
            if d <= MAX_JSON_DEPTH:  # deeper is refused anyway: stop walking
                stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def check_json_depth(text: str, source: str) -> None:
    """``SceneFormatError`` naming ``source`` if ``text`` nests deeper than ``MAX_JSON_DEPTH``."""
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise SceneFormatError(
            f"{source}: lists and objects nested {depth} deep; expected at most {MAX_JSON_DEPTH}"
            " (a scene needs 5; is a field holding generated or damaged data?)"
        )


def _points(scene: Scene) -> dict[str, np.ndarray]:
    """Every placed point by what holds it, ``(n, 2)`` each."""
    rg = scene.roadgraph
    out = {
        "roadgraph": np.concatenate(
            [
                rg.lane_xy[rg.lane_valid],
                rg.line_xy[rg.line_valid],
                rg.edge_xy[rg.edge_valid],
                rg.driveway_xy[rg.driveway_valid],
                rg.crosswalk_xy[rg.crosswalk_valid],
                rg.speed_bump_xy[rg.speed_bump_valid],
                rg.stop_sign_xy.reshape(-1, 2),
            ]
        ),
        "agents": np.concatenate(
            [
                scene.spawn_pose[scene.agent_valid, :2],
                scene.route_xy[scene.route_valid],
                scene.goal_xy[scene.agent_valid],
            ]
        ),
    }
    if scene.log is not None:
        out["log"] = scene.log.xy[scene.log.valid]
    if scene.replay is not None:
        out["replay"] = scene.replay.xy[scene.replay.valid]
    if scene.signals is not None:
        out["signals"] = np.concatenate([scene.signals.stop_xy, scene.signals.sign_xy]).reshape(-1, 2)
    return {k: v for k, v in out.items() if len(v)}


def check_extent(scene: Scene, source: str) -> None:
    """``SceneFormatError`` naming ``source``, the extent and the bound if everything the scene places
    spans more than ``MAX_SCENE_EXTENT_M`` in x or y (checked before any grid is built)."""
    parts = _points(scene)
    allp = np.concatenate(list(parts.values()))
    lo, hi = allp.min(axis=0), allp.max(axis=0)
    span = hi - lo
    if (span <= MAX_SCENE_EXTENT_M).all():
        return
    boxes = ", ".join(
        f"{k} x [{p[:, 0].min():.6g}, {p[:, 0].max():.6g}] y [{p[:, 1].min():.6g}, {p[:, 1].max():.6g}]"
        for k, p in parts.items()
    )
    raise SceneFormatError(
        f"{source}: the scene spans {span[0]:.6g} m x {span[1]:.6g} m; expected at most"
        f" {MAX_SCENE_EXTENT_M:g} m a side (the drivable grid is built over it at 1 m); {boxes}"
    )


def check_scene(scene: Scene, source: str) -> None:
    """Refuse what :data:`~scenefactory.scenes.plausibility.REFUSED` lists, naming ``source``, field."""
    if scene.surface not in SURFACES:
        raise SceneFormatError(
            f"{source}: field 'surface': expected one of {', '.join(SURFACE_NAMES)}, got {scene.surface!r}"
        )
    for name, rec in (("log", scene.log), ("replay", scene.replay)):
        if rec is not None and rec.valid.shape[1] > MAX_LOG_STEPS:
            raise SceneFormatError(
                f"{source}: field '{name}': {rec.valid.shape[1]} steps; expected at most {MAX_LOG_STEPS}"
            )
    if scene.signals is not None and scene.signals.num_steps > MAX_LOG_STEPS:
        raise SceneFormatError(
            f"{source}: field 'signals': {scene.signals.num_steps} steps; expected at most {MAX_LOG_STEPS}"
        )
    if "current_time_index" in scene.params:
        t0 = scene.params["current_time_index"]
        if isinstance(t0, bool) or not isinstance(t0, int) or not CURRENT_TIME_INDEX.contains(t0):
            raise SceneFormatError(
                f"{source}: field 'params.current_time_index': expected an integer step index in"
                f" [0, {MAX_LOG_STEPS - 1}], got {str(t0)[:40]}"
            )
    ids = np.flatnonzero(scene.agent_valid)
    key = np.column_stack([scene.spawn_pose, scene.length_m, scene.width_m])[ids]
    _, first, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():
        row = key[first[np.argmax(counts > 1)]]
        same = [int(i) for i, k in zip(ids, key, strict=True) if (k == row).all()]
        raise SceneFormatError(
            f"{source}: field 'agents': agents {same} are the same agent (spawn pose, length and width"
            " identical); expected each controlled agent once"
        )
    check_extent(scene, source)


def _overlap(
    ca: np.ndarray, ya: np.ndarray, la: np.ndarray, wa: np.ndarray,
    cb: np.ndarray, yb: np.ndarray, lb: np.ndarray, wb: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """Oriented boxes ``a`` and ``b`` overlap (broadcast shapes; centres ``(..., 2)``): the separating
    axis test of ``tasks.driving.geometry.pairwise_box_overlap``, touching counted, in numpy."""
    d = cb - ca
    ua = np.stack((np.cos(ya), np.sin(ya)), -1)
    va = np.stack((-np.sin(ya), np.cos(ya)), -1)
    ub = np.stack((np.cos(yb), np.sin(yb)), -1)
    vb = np.stack((-np.sin(yb), np.cos(yb)), -1)
    c, s = np.abs(np.cos(ya - yb)), np.abs(np.sin(ya - yb))
    ha, hwa, hb, hwb = la / 2, wa / 2, lb / 2, wb / 2
    sep = (
        (np.abs((d * ua).sum(-1)) > ha + hb * c + hwb * s)
        | (np.abs((d * va).sum(-1)) > hwa + hb * s + hwb * c)
        | (np.abs((d * ub).sum(-1)) > hb + ha * c + hwa * s)
        | (np.abs((d * vb).sum(-1)) > hwb + ha * s + hwa * c)
    )
    return ~sep


def _spawn_overlaps(scene: Scene) -> int:
    ids = np.flatnonzero(scene.agent_valid)
    p, yaw = scene.spawn_pose[ids, :2], scene.spawn_pose[ids, 2]
    ln, wd = scene.length_m[ids], scene.width_m[ids]
    hit = _overlap(p[:, None], yaw[:, None], ln[:, None], wd[:, None], p[None], yaw[None], ln[None], wd[None])
    np.fill_diagonal(hit, False)
    return int(hit.any(axis=1).sum())


def _objects_on_paths(scene: Scene) -> int:
    """Replayed objects whose box overlaps a controlled agent's at the same time (the agent's log, or
    its spawn pose at step 0 without one)."""
    rep = scene.replay
    if rep is None or not rep.num_objects:
        return 0
    ids = np.flatnonzero(scene.agent_valid)
    if scene.log is not None:
        log = scene.log
        steps = np.arange(log.num_steps)
        ridx = np.rint(steps * log.dt_s / rep.dt_s).astype(np.int64)
        ok = ridx < rep.valid.shape[1]
        steps, ridx = steps[ok], ridx[ok]
        axy, ayaw, avalid = log.xy[ids][:, steps], log.yaw[ids][:, steps], log.valid[ids][:, steps]
    else:
        ridx = np.zeros(1, dtype=np.int64)
        axy, ayaw = scene.spawn_pose[ids, None, :2], scene.spawn_pose[ids, None, 2]
        avalid = np.ones((len(ids), 1), dtype=bool)
    oxy, oyaw, ovalid = rep.xy[:, ridx], rep.yaw[:, ridx], rep.valid[:, ridx]
    # (N objects, K agents, T steps); pairs whose centres are farther than the sum of half diagonals skip SAT
    reach = 0.5 * (
        np.hypot(rep.length_m, rep.width_m)[:, None] + np.hypot(scene.length_m, scene.width_m)[ids][None]
    )
    dist = np.linalg.norm(oxy[:, None] - axy[None], axis=-1)
    near = (dist <= reach[..., None]) & ovalid[:, None] & avalid[None]
    n, k, t = np.nonzero(near)
    if not len(n):
        return 0
    hit = _overlap(
        axy[k, t], ayaw[k, t], scene.length_m[ids][k], scene.width_m[ids][k],
        oxy[n, t], oyaw[n, t], rep.length_m[n], rep.width_m[n],
    )  # fmt: skip
    return len(np.unique(n[hit]))


def scene_warnings(scene: Scene) -> dict[str, int]:
    """Counts of what :data:`~scenefactory.scenes.plausibility.WARNED` lists (every key, 0 included):
    agents overlapping another at spawn, replayed objects on an agent's logged path at the same step,
    zero-length lanes, and self-successor lanes that are not closed loops."""
    rg = scene.roadgraph
    zero = self_succ = 0
    for i in range(rg.num_lanes):
        xy = rg.lane_xy[i][rg.lane_valid[i]]
        if not np.any(np.abs(xy - xy[0]) > 0.0):
            zero += 1
        elif i in rg.exits(i) and np.linalg.norm(xy[-1] - xy[0]) > 1.0:
            self_succ += 1
    counts = {
        "overlapping_spawns": _spawn_overlaps(scene),
        "objects_on_agent_path": _objects_on_paths(scene),
        "zero_length_lanes": zero,
        "self_successor_lanes": self_succ,
    }
    assert tuple(counts) == tuple(k for k, _ in WARNED)
    return counts


def describe_warnings(counts: dict[str, int]) -> str:
    """``counts`` of :func:`scene_warnings` as one phrase, e.g. ``2 overlapping_spawns``."""
    return ", ".join(f"{n} {k}" for k, n in counts.items() if n)
