"""Agents per world (K) chosen from the scenes' controlled-agent counts.

A world has K agent slots; a scene of ``n`` controlled agents fills ``min(n, K)`` of them at the
start of its episode (the rest are padding; agents beyond K are replayed from the scene's log, see
:mod:`~scenefactory.tasks.driving.pool`). Over a pool of scenes drawn uniformly, the mean initial
fill of a world is

    fill(K) = mean_i(min(n_i, K)) / K,

which never grows with K. :func:`agents_per_world_for` returns the largest K whose fill is at least
``min_fill`` — as many controlled agents per world as the data allows without mostly padding.
"""

from __future__ import annotations

from collections.abc import Iterable

DEFAULT_MIN_FILL = 0.9
"""Mean initial fill of the worlds that ``--agents auto`` asks for."""


def initial_fill(counts: Iterable[int], k: int) -> float:
    """``fill(K)`` of the module docstring: the mean fraction of a world's ``k`` slots that a scene
    drawn from ``counts`` (controlled agents per scene) fills at the start of its episode."""
    ns = [int(n) for n in counts]
    if not ns:
        raise ValueError("no scenes: need at least one agent count")
    if k < 1:
        raise ValueError(f"agents per world must be >= 1, got {k}")
    return sum(min(max(n, 0), k) for n in ns) / (k * len(ns))


def agents_per_world_for(
    counts: Iterable[int], min_fill: float = DEFAULT_MIN_FILL, max_agents: int | None = None
) -> int:
    """The largest K with ``fill(K) >= min_fill`` (module docstring) for scenes of ``counts``
    controlled agents each (``Scene.num_agents``).

    K never exceeds the most agents any scene has (a slot no scene fills is pure padding) nor
    ``max_agents``; it is 1 when even one slot per world misses the bound (scenes without agents).
    """
    ns = [max(int(n), 0) for n in counts]
    if not ns:
        raise ValueError("no scenes: need at least one agent count to choose agents per world from")
    if not 0.0 < min_fill <= 1.0:
        raise ValueError(f"min_fill must be in (0, 1], got {min_fill}")
    top = max(max(ns), 1)
    if max_agents is not None:
        top = min(top, max_agents)
    s = len(ns)
    best = 1
    for k in range(1, top + 1):  # fill(K) never grows with K: stop at the first miss
        if sum(min(n, k) for n in ns) < min_fill * k * s - 1e-9 * k * s:
            break
        best = k
    return best
