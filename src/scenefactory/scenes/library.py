"""The default scene sets: seeded procedural scenes for disjoint train/eval splits, and scene folders.

A split's scene ``i`` is generator ``kinds[i % len(kinds)]`` with seed ``scene_seed(split, i)``;
train seeds are ``0 .. 999_999`` and eval seeds ``1_000_000 .. 1_999_999``, so no eval scene is
ever a training scene.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from scenefactory.errors import UserError
from scenefactory.scenes.procedural import GENERATORS
from scenefactory.scenes.routes import make_procedural_scene
from scenefactory.scenes.scene import Scene
from scenefactory.scenes.scene_json import load_scene

GENERATOR_KINDS: tuple[str, ...] = tuple(
    GENERATORS
)  # straight, curved, intersection, t_junction, roundabout, merge
SEEDS_PER_SPLIT = 1_000_000
SPLIT_SEED_BASE: Mapping[str, int] = MappingProxyType({"train": 0, "eval": SEEDS_PER_SPLIT})


def scene_seed(split: str, index: int) -> int:
    """Seed of scene ``index`` (0-based) of ``split`` (``"train"`` or ``"eval"``); ranges never overlap."""
    if split not in SPLIT_SEED_BASE:
        raise UserError(f"unknown scene split {split!r}; valid splits: {', '.join(SPLIT_SEED_BASE)}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < SEEDS_PER_SPLIT:
        raise UserError(f"scene index must be an integer in [0, {SEEDS_PER_SPLIT - 1}], got {index!r}")
    return SPLIT_SEED_BASE[split] + index


def procedural_scenes(
    split: str,
    num_scenes: int,
    num_agents: int,
    kinds: Sequence[str] = GENERATOR_KINDS,
    base_seed: int = 0,
    signal_cycle_s: float = 0.0,
) -> list[Scene]:
    """``num_scenes`` procedural scenes of ``split``, cycling through ``kinds``.

    Scene ``i`` uses ``kinds[i % len(kinds)]`` and seed ``scene_seed(split, base_seed + i)``;
    each scene holds up to ``num_agents`` controlled agents (as many as fit). A positive
    ``signal_cycle_s`` signals the junctions (the kinds whose params have ``signal_cycle_s``) with
    that cycle; the roads and agents stay those of the same seeds without signals.
    """
    if not kinds:
        raise UserError("procedural_scenes: kinds must name at least one generator")
    unknown = [k for k in kinds if k not in GENERATORS]
    if unknown:
        raise UserError(f"unknown scene generators {unknown}; valid kinds: {', '.join(GENERATOR_KINDS)}")
    if num_scenes < 0:
        raise UserError(f"num_scenes must be >= 0, got {num_scenes}")
    signalled = {
        k
        for k in kinds
        if signal_cycle_s > 0 and "signal_cycle_s" in {f.name for f in fields(GENERATORS[k].params_type)}
    }
    overrides: dict[str, Any] = {"signal_cycle_s": signal_cycle_s}
    return [
        make_procedural_scene(
            kinds[i % len(kinds)],
            scene_seed(split, base_seed + i),
            num_agents,
            **(overrides if kinds[i % len(kinds)] in signalled else {}),
        )
        for i in range(num_scenes)
    ]


def load_scene_dir(path: str | os.PathLike[str]) -> list[Scene]:
    """Every ``*.json`` scene in folder ``path``, in file-name order.

    Raises ``UserError`` if the folder is missing or holds no scene files, and ``SceneFormatError``
    (naming the file and field) for a malformed one.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise UserError(f"scene folder {str(folder)!r} does not exist or is not a folder")
    files = sorted(folder.glob("*.json"))
    if not files:
        raise UserError(f"scene folder {str(folder)!r} holds no *.json scene files")
    return [load_scene(f) for f in files]
