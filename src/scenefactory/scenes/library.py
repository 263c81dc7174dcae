"""The default scene sets: seeded procedural scenes for disjoint train/eval splits, and scene folders.

A split's scene ``i`` is generator ``kinds[i % len(kinds)]`` with seed ``scene_seed(split, i)``;
train seeds are ``0 .. 999_999`` and eval seeds ``1_000_000 .. 1_999_999``, so no eval scene is
ever a training scene.
"""

from __future__ import annotations

import json
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


SCENE_SPLITS: tuple[str, ...] = ("all", "train", "eval")
"""``--scene-split``: every scene of a folder, or those ``convert`` put in one split (its index)."""


def load_scene_dir(path: str | os.PathLike[str], split: str = "all", limit: int | None = None) -> list[Scene]:
    """Every ``*.json`` scene in folder ``path`` (the first ``limit`` only, when given: the others are
    not read), in file-name order; with ``split`` ``"train"`` or
    ``"eval"``, only the scenes ``scenefactory convert`` put in that split, as its ``index.json``
    (in ``path`` or the folder above it, e.g. ``OUT/json`` beside ``OUT/index.json``) lists them.

    Raises ``UserError`` if the folder is missing or holds no scene files, or, for a split, if no
    index is found, it gives no splits, or the split is empty; and ``SceneFormatError`` (naming the
    file and field) for a malformed scene.
    """
    folder = Path(path)
    if split not in SCENE_SPLITS:
        raise UserError(f"unknown scene split {split!r}; valid splits: {', '.join(SCENE_SPLITS)}")
    if not folder.is_dir():
        raise UserError(f"scene folder {str(folder)!r} does not exist or is not a folder")
    if split != "all":
        return [load_scene(f) for f in _split_files(folder, split)[:limit]]
    files = sorted(folder.glob("*.json"))
    if not files:
        raise UserError(f"scene folder {str(folder)!r} holds no *.json scene files")
    return [load_scene(f) for f in files[:limit]]


def _split_files(folder: Path, split: str) -> list[Path]:
    """The JSON scene files of ``split`` that ``folder``'s conversion index lists, by file name."""
    index_path = next(
        (p / "index.json" for p in (folder, folder.parent) if (p / "index.json").is_file()), None
    )
    if index_path is None:
        raise UserError(
            f"scene folder {str(folder)!r} has no index.json (nor has the folder above it): --scene-split"
            f" {split} needs the index that 'scenefactory convert' writes"
        )
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
        scenes = index["scenes"]
        entries = [(e.get("split"), e.get("files", [])) for e in scenes.values()]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{index_path}: not a conversion index with a 'scenes' object ({exc})") from None
    if entries and all(s is None for s, _ in entries):
        raise UserError(
            f"{index_path}: its scenes have no split (converted before splits existed); convert them again"
        )
    counts = {s: sum(1 for got, _ in entries if got == s) for s in SCENE_SPLITS[1:]}
    base = index_path.parent.resolve()
    files = sorted(
        (base / f for got, names in entries if got == split for f in names if str(f).endswith(".json")),
        key=lambda p: p.name,
    )
    if not files:
        shown = ", ".join(f"{n} {s}" for s, n in counts.items())
        raise UserError(f"scene folder {str(folder)!r} holds no {split} scenes ({index_path} lists {shown})")
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise UserError(
            f"{index_path} lists {len(missing)} {split} scene files that are missing, e.g."
            f" {str(missing[0])!r}"
        )
    return files
