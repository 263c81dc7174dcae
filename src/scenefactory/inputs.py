"""Checks of Python API arguments at the call: integers, numbers, seeds, devices and action tensors.

The CLI parses text (``scenefactory.bounds.IntRange`` and friends); the Python API receives objects,
which can be of the wrong type as well as out of range: ``num_worlds=2.5``, ``"2"``, ``True``,
``seed=2**64``, ``device="cuda"`` on a machine without a GPU, actions as a list or on the meta device.
Each check here raises :class:`~scenefactory.errors.ArgumentError` (a ``UserError``, ``ValueError``
and ``TypeError``) naming the argument, what was expected and what was given, before the value
reaches torch or an engine. The bounds themselves are the CLI's (:mod:`scenefactory.bounds`).

Actions (:func:`as_actions`) are converted, not refused, where the meaning is unambiguous: a numpy
array or a nested list of numbers becomes a float32 tensor, a tensor of another real dtype is cast to
float32, a tensor on another real device is copied to the environment's device, and a tensor that
requires grad is detached (the simulators are not differentiable: no gradient flows back through a
step). Refused, with the argument named: a non-numeric or boolean or complex array, a meta tensor
(it holds no values), a wrong shape, and NaN or infinite values (the engines' own check).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np
import torch

from scenefactory.errors import ArgumentError


def _shown(value: Any) -> str:
    """``value`` and its type, short and on one line, e.g. ``2.5 (float)``."""
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{text} ({type(value).__name__})"


def integer(value: Any, name: str, low: int, high: int, note: str = "") -> int:
    """``value`` as an ``int`` in ``[low, high]``: an ``int`` or numpy integer, never a bool, float
    or string (``2.5``, ``2.0`` and ``"2"`` are refused: nothing is rounded or parsed)."""
    if isinstance(value, bool | np.bool_ | float | str | bytes):
        raise ArgumentError(f"{name}: expected an integer in [{low}, {high}], got {_shown(value)}")
    try:
        out = operator.index(value)
    except TypeError:
        raise ArgumentError(f"{name}: expected an integer in [{low}, {high}], got {_shown(value)}") from None
    if not low <= out <= high:
        why = f" ({note})" if note and out > high else ""
        shown = str(out) if len(str(out)) <= 40 else f"{str(out)[:20]}..."
        raise ArgumentError(f"{name}: expected an integer in [{low}, {high}]{why}, got {shown}")
    return int(out)


def number(value: Any, name: str, describe: str, ok: Any) -> float:
    """``value`` as a finite ``float`` for which ``ok(value)`` holds; ``describe`` is what is
    expected (e.g. ``a physics rate in Hz in [100, 1000]``). Bools and strings are refused."""
    if isinstance(value, bool | np.bool_ | str | bytes) or not isinstance(value, int | float | np.number):
        raise ArgumentError(f"{name}: expected {describe}, got {_shown(value)}")
    out = float(value)
    if not math.isfinite(out) or not ok(out):
        raise ArgumentError(f"{name}: expected {describe}, got {out:g}")
    return out


def device(value: Any, name: str = "device") -> torch.device:
    """``value`` (``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``torch.device``) as a device this
    process can use: a CUDA device needs a GPU that torch sees; meta and other device types are
    refused (the engines run on CPU and CUDA)."""
    expected = "'cpu' or 'cuda[:N]' (a torch.device or its name)"
    if not isinstance(value, str | torch.device):
        raise ArgumentError(f"{name}: expected {expected}, got {_shown(value)}")
    try:
        dev = torch.device(value)
    except (RuntimeError, ValueError):
        raise ArgumentError(f"{name}: expected {expected}, got {value!r}") from None
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ArgumentError(f"{name}: expected {expected}, got {str(dev)!r} (no engine runs on {dev.type})")
    if not torch.cuda.is_available():
        raise ArgumentError(
            f"{name}: {str(dev)!r} asked for, but this torch sees no CUDA GPU"
            f" (torch.cuda.is_available() is False); expected 'cpu' here"
        )
    count = torch.cuda.device_count()
    if dev.index is not None and dev.index >= count:
        raise ArgumentError(f"{name}: {str(dev)!r} asked for, but this machine has {count} CUDA GPU(s)")
    return dev


def as_actions(
    actions: Any, shape: tuple[int, ...], device: torch.device, name: str = "actions"
) -> torch.Tensor:
    """``actions`` as a float32 tensor of ``shape`` on ``device`` (see the module docstring for
    what is converted and what is refused); no copy for a float32 tensor already there."""
    if isinstance(actions, torch.Tensor):
        t = actions
    elif isinstance(actions, np.ndarray | list | tuple) or np.isscalar(actions):
        try:
            arr = np.asarray(actions)
        except ValueError as exc:  # ragged nested lists
            raise ArgumentError(
                f"{name}: expected an array of shape {shape}, got a ragged {_shown(actions)}: {exc}"
            ) from None
        if arr.dtype.kind not in "iuf":
            raise ArgumentError(
                f"{name}: expected real numbers of shape {shape}, got a numpy array of dtype {arr.dtype}"
            )
        t = torch.from_numpy(np.ascontiguousarray(arr))
    else:
        raise ArgumentError(
            f"{name}: expected a tensor, numpy array or nested list of shape {shape}, got {_shown(actions)}"
        )
    if t.device.type == "meta":
        raise ArgumentError(f"{name}: a tensor on the meta device holds no values; expected one on {device}")
    if t.dtype == torch.bool or t.is_complex() or t.is_quantized:
        raise ArgumentError(f"{name}: expected real numbers, got dtype {t.dtype}")
    if tuple(t.shape) != tuple(shape):
        raise ArgumentError(f"{name}: expected shape {tuple(shape)}, got {tuple(t.shape)}")
    return t.detach().to(device=device, dtype=torch.float32)
