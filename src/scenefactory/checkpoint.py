"""Checkpoints: what one may contain, how it is written, and how it is read without running code.

A scenefactory checkpoint is one ``torch.save`` dict of **plain data only**: tensors, ``str``,
``int``, ``float``, ``bool``, ``None``, and lists, tuples and str-keyed dicts of those. Configs are
JSON-able dicts (rebuilt into typed, frozen configs that reject unknown fields); random-generator
states are tensors or integers. Reading uses ``torch.load(weights_only=True)``, whose restricted
unpickler refuses every other Python object *before* building it, so a checkpoint from a colleague,
a download or a planted ``checkpoints/latest.pt`` cannot execute code. :func:`save_checkpoint`
refuses to write anything else, so every file this project writes can be read back that way.

Writes are atomic (temp file + rename). A ``latest.pt`` that cannot be read (a torn copy, a full
disk, bit rot) is replaced by the newest readable ``model_<N>.pt`` beside it, with a warning.
"""

from __future__ import annotations

import io
import lzma
import math
import os
import pickle
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.errors import CheckpointError, warn
from scenefactory.io import atomic_write_bytes

CHECKPOINT_FORMAT = "scenefactory.checkpoint/1"
LATEST = "latest.pt"
_ITERATION_FILE = re.compile(r"^model_(\d+)\.pt$")
_PLAIN_LEAVES = (str, int, float, bool, type(None))


def to_plain(data: Any, where: str = "checkpoint") -> Any:
    """``data`` as plain data: numpy scalars become Python numbers and numpy arrays tensors (both
    would otherwise pickle as numpy objects, which the restricted reader refuses); any other object
    is a ``TypeError`` naming where it sits."""
    if isinstance(data, torch.Tensor) or type(data) in _PLAIN_LEAVES:
        return data
    if isinstance(data, np.generic):
        return data.item()
    if isinstance(data, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(data).copy())
    if isinstance(data, Mapping):
        out = {}
        for key, value in data.items():
            if type(key) not in (str, int):
                raise TypeError(f"{where}: key {key!r} is a {type(key).__name__}, expected str or int")
            out[key] = to_plain(value, f"{where}.{key}")
        return out
    if isinstance(data, list | tuple):
        items = [to_plain(v, f"{where}[{i}]") for i, v in enumerate(data)]
        return items if isinstance(data, list) else tuple(items)
    raise TypeError(
        f"{where} is a {type(data).__module__}.{type(data).__name__}; a checkpoint holds only tensors "
        "and plain data (str, int, float, bool, None, lists, tuples, dicts)"
    )


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Turn ``payload`` into plain data (:func:`to_plain`), ``torch.save`` it to memory, then write
    the file atomically: a crash never leaves a torn checkpoint."""
    buf = io.BytesIO()
    torch.save(to_plain(payload), buf)
    atomic_write_bytes(path, buf.getvalue())


def save_iteration(ckpt_dir: Path, iteration: int, payload: dict[str, Any]) -> Path:
    """Write ``payload`` as ``model_<iteration>.pt`` and ``latest.pt`` in ``ckpt_dir``; returns latest."""
    save_checkpoint(ckpt_dir / f"model_{iteration}.pt", payload)
    save_checkpoint(ckpt_dir / LATEST, payload)
    return ckpt_dir / LATEST


class _UnreadableError(CheckpointError):
    """The file is not a readable torch file (torn, truncated, not a checkpoint at all)."""


def _unpickler_reason(exc: BaseException) -> str:
    """The informative line of torch's long weights-only error (which object or opcode it met)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for ln in lines:
        if "GLOBAL" in ln or "Unsupported" in ln or "global" in ln.split(":")[0]:
            return ln[:200]
    return (lines[-1] if lines else type(exc).__name__)[:200]


def safe_torch_load(p: Path, blob: bytes | None = None) -> Any:
    """``torch.load(weights_only=True)`` of file ``p`` (or of ``blob``, named ``p`` in messages): a
    file holding Python objects is refused before any is built (:class:`CheckpointError`), a torn
    or foreign one is :class:`_UnreadableError`; both one line naming ``p``."""
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols before refusing them
            warnings.simplefilter("ignore", UserWarning)
            return torch.load(p if blob is None else io.BytesIO(blob), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        reason = _unpickler_reason(exc)
        if "GLOBAL" in reason or "global" in reason:
            raise CheckpointError(
                f"{p}: refused to load: it holds Python objects other than tensors and plain data, which "
                f"could run code; scenefactory files never do ({reason})"
            ) from None
        raise _UnreadableError(f"{p}: not a readable torch file ({reason})") from None
    except Exception as exc:  # torch raises many types for a torn or foreign file
        msg = " ".join(str(exc).split())[:160] or "empty or truncated file"
        raise _UnreadableError(f"{p}: not a readable torch file ({type(exc).__name__}: {msg})") from None


def read_checkpoint_file(p: Path) -> dict[str, Any]:
    """One checkpoint file, read with the restricted unpickler; no fallback."""
    data = safe_torch_load(p, _read_bytes(p))
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{p}: not a scenefactory checkpoint (expected format '{CHECKPOINT_FORMAT}')")
    return unpack_stage(p, data) if "half_precision" in data else data  # written by pack_stage


# ----------------------------------------------------------------------------- stage checkpoints

HALF_MIN_NUMEL = 1024
"""Network tensors of at least this many values are stored in float16 by :func:`pack_stage` (the
weight matrices; biases, action noise and observation statistics stay float32)."""
NETWORKS = ("actor_state_dict", "critic_state_dict")
XZ_MAGIC = b"\xfd7zXZ\x00"
MAX_UNPACKED_BYTES = 256 * 2**20
"""A compressed checkpoint may unpack to at most this much (a damaged or hostile file stops there)."""


def pack_stage(stage: dict[str, Any]) -> bytes:
    """The committed form of a stage checkpoint (``rl.checkpoints.write_stage_checkpoint``) and of a
    shipped policy too large in float32 (``export go1 --half-precision``): the
    networks' float32 weight matrices (:data:`HALF_MIN_NUMEL` values or more) rounded to float16,
    each stored as its two byte planes (a uint8 ``(2, n)`` tensor: low bytes, then high bytes, which
    compress apart), their names and shapes under ``half_precision``; the history's rows as columns
    (``{"columns": {key: values}}``, when every row has the same keys); the whole ``torch.save`` file
    then LZMA-compressed. :func:`read_checkpoint_file` undoes all of it. A 25-frame Go1 actor's
    weights go from 1.34 MB to about 0.55 MB, each rounded to float16 (within 2^-11 of its value)."""
    out = dict(stage)
    half: dict[str, list[int]] = {}
    for net in NETWORKS:
        if net not in out:
            continue
        state = dict(out[net])
        for name, value in state.items():
            if value.dtype == torch.float32 and value.numel() >= HALF_MIN_NUMEL and "normalizer" not in name:
                planes = value.to(torch.float16).reshape(-1).view(torch.uint8).reshape(-1, 2)
                state[name] = planes.T.contiguous()
                half[f"{net}/{name}"] = list(value.shape)
        out[net] = state
    out["half_precision"] = half
    rows = out.get("history")
    if (
        isinstance(rows, list)
        and rows
        and all(isinstance(r, dict) and list(r) == list(rows[0]) for r in rows)
    ):
        out["history"] = {"columns": {k: [r[k] for r in rows] for k in rows[0]}}  # compresses a sixth smaller
    buf = io.BytesIO()
    torch.save(out, buf)
    return lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME)


def _unpack_half(p: Path, entry: str, planes: Any, shape: Any) -> torch.Tensor:
    ok = isinstance(shape, list) and all(isinstance(n, int) and n > 0 for n in shape)
    numel = math.prod(shape) if ok else -1
    if not isinstance(planes, torch.Tensor) or planes.dtype != torch.uint8 or planes.shape != (2, numel):
        raise CheckpointError(
            f"{p}: packed checkpoint weight '{entry}' is not the float16 planes of a {shape} tensor"
        )
    return planes.T.contiguous().view(torch.float16).reshape(shape).to(torch.float32)


def unpack_stage(p: Path, data: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint as :func:`pack_stage` wrote it, back in training form (the listed float16
    weights as float32 tensors); one line naming ``p`` and the field when damaged."""
    out = dict(data)
    half = out.pop("half_precision", {})
    if not isinstance(half, dict):
        raise CheckpointError(f"{p}: packed checkpoint field 'half_precision' is not a dict of weight shapes")
    for entry, shape in half.items():
        net, _, name = str(entry).partition("/")
        state = out.get(net)
        if net not in NETWORKS or not isinstance(state, dict) or name not in state:
            raise CheckpointError(
                f"{p}: packed checkpoint field 'half_precision' names '{entry}', not a network weight"
            )
        out[net] = {**state, name: _unpack_half(p, entry, state[name], shape)}
    if isinstance(out.get("history"), dict):
        out["history"] = _history_rows(p, out["history"].get("columns"))
    return out


def _history_rows(p: Path, columns: Any) -> list[dict[str, Any]]:
    """The history's rows from :func:`pack_stage`'s columns (lists of one length)."""
    lists = [v for v in columns.values() if isinstance(v, list)] if isinstance(columns, dict) else []
    if not isinstance(columns, dict) or len(lists) != len(columns) or len({len(v) for v in lists}) > 1:
        raise CheckpointError(f"{p}: packed checkpoint field 'history.columns' is not lists of one length")
    return [dict(zip(columns, row, strict=True)) for row in zip(*lists, strict=True)]


def _read_bytes(p: Path) -> bytes | None:
    """The unpacked bytes of an LZMA-compressed checkpoint (:func:`pack_stage`), ``None`` for a
    plain one (read by torch straight from the file)."""
    with p.open("rb") as f:
        if f.read(len(XZ_MAGIC)) != XZ_MAGIC:
            return None
    unpacker = lzma.LZMADecompressor()
    try:
        blob = unpacker.decompress(p.read_bytes(), max_length=MAX_UNPACKED_BYTES)
    except lzma.LZMAError as exc:
        raise _UnreadableError(f"{p}: a damaged compressed checkpoint ({exc})") from None
    if not unpacker.eof:
        why = "is truncated" if unpacker.needs_input else f"unpacks to over {MAX_UNPACKED_BYTES:,} bytes"
        raise _UnreadableError(f"{p}: a compressed checkpoint that {why}")
    return blob


def iteration_files(ckpt_dir: Path) -> list[tuple[int, Path]]:
    """``(iteration, model_<iteration>.pt)`` in ``ckpt_dir``, newest first."""
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), f) for f in ckpt_dir.iterdir() if (m := _ITERATION_FILE.match(f.name))]
    return sorted(found, reverse=True)


def resolve_checkpoint_path(path: str | os.PathLike[str]) -> Path:
    """A run folder or checkpoints folder → its ``latest.pt``; a file stays as it is."""
    p = Path(path)
    if p.is_dir():
        p = p / "checkpoints" / LATEST if (p / "checkpoints").is_dir() else p / LATEST
    return p


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a scenefactory checkpoint (a file, or a run or checkpoints folder → its ``latest.pt``).

    A missing, foreign or unsafe file is a :class:`CheckpointError`. An unreadable ``latest.pt`` falls
    back to the newest readable ``model_<N>.pt`` beside it, saying so on stderr.
    """
    p = resolve_checkpoint_path(path)
    if p.name == LATEST and not p.is_file() and iteration_files(p.parent):
        return _fallback(p, "is missing")
    if not p.is_file():
        raise CheckpointError(
            f"checkpoint not found: {p} (expected a .pt file written by 'scenefactory train')"
        )
    try:
        return read_checkpoint_file(p)
    except _UnreadableError as exc:
        if p.name != LATEST or not iteration_files(p.parent):
            raise
        return _fallback(p, f"cannot be read ({exc})")


def _fallback(latest: Path, why: str) -> dict[str, Any]:
    problems = []
    for iteration, f in iteration_files(latest.parent):
        try:
            data = read_checkpoint_file(f)
        except CheckpointError as exc:
            problems.append(str(exc))
            continue
        warn(f"{latest} {why}; using {f.name} (iteration {iteration}), the newest readable checkpoint")
        return data
    raise CheckpointError(f"{latest} {why}, and no model_<N>.pt beside it is readable either: {problems[0]}")


# ----------------------------------------------------------------------------- checking contents


def require_keys(data: Mapping[str, Any], path: str | os.PathLike[str], keys: tuple[str, ...]) -> None:
    """One-line error naming the first of ``keys`` missing from a checkpoint."""
    missing = [k for k in keys if k not in data]
    if missing:
        raise CheckpointError(f"{path}: checkpoint lacks '{missing[0]}' (hand-edited or truncated?)")


def require_int(data: Mapping[str, Any], path: str | os.PathLike[str], key: str, low: int = 0) -> int:
    """``data[key]`` as an integer >= ``low``, or a one-line error naming the key."""
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise CheckpointError(f"{path}: checkpoint field '{key}' is {value!r}, expected an integer >= {low}")
    return value


def require_finite_state(
    state: Any, path: str | os.PathLike[str], key: str, allow_empty: bool = False
) -> dict[str, torch.Tensor]:
    """A saved ``state_dict`` of tensors with only finite values, or an error naming the entry."""
    if not isinstance(state, Mapping) or not (state or allow_empty):
        raise CheckpointError(f"{path}: checkpoint field '{key}' is not a dict of tensors")
    for name, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise CheckpointError(f"{path}: '{key}.{name}' is a {type(value).__name__}, expected a tensor")
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise CheckpointError(
                f"{path}: '{key}.{name}' holds NaN or infinite values (the run diverged: use an "
                "earlier model_<N>.pt)"
            )
    return dict(state)


def config_from_checkpoint(
    data: Mapping[str, Any], path: str | os.PathLike[str], key: str, build: Any
) -> Any:
    """``build(data[key])`` with any error in the saved config turned into one line naming the field."""
    cfg = data.get(key)
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{path}: checkpoint field '{key}' is {type(cfg).__name__}, expected a dict")
    try:
        return build(cfg)
    except TypeError as exc:  # dataclass: unexpected or missing keyword argument
        raise CheckpointError(f"{path}: checkpoint field '{key}' does not fit this version: {exc}") from None
    except (ValueError, KeyError, AttributeError, IndexError) as exc:
        raise CheckpointError(
            f"{path}: checkpoint field '{key}' is invalid: {type(exc).__name__}: {exc}"
        ) from None


def finite_float(value: Any) -> bool:
    """A real, finite number (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
