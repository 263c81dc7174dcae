"""Tensors in and out of the adapters: numpy views of the environment's tensors, without copies.

An adapter built with ``arrays="numpy"`` hands out ``tensor.numpy()`` of the environment's own
(CPU) tensors: the array shares the tensor's memory, nothing is copied. On a CUDA device that is
impossible, and it costs one device-to-host copy per array. ``arrays="torch"`` hands out the tensors
themselves, on the environment's device (zero-copy everywhere; the spaces then describe their
shapes and dtypes, and ``space.contains`` does not apply to them). The environments build new
tensors every step, so an array handed out earlier is never overwritten by a later step; one
exception: the Go1 actor observation is the environment's history buffer, which ``reset()``
rewrites in place (copy the latest observation first to keep it across a reset).
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from scenefactory.bounds import SEED
from scenefactory.inputs import as_actions

ArrayKind = Literal["numpy", "torch"]
ARRAY_KINDS: tuple[str, ...] = ("numpy", "torch")


def check_array_kind(kind: str) -> ArrayKind:
    """``kind`` if it is one of :data:`ARRAY_KINDS`, else a ``ValueError`` naming them."""
    if kind == "numpy":
        return "numpy"
    if kind == "torch":
        return "torch"
    raise ValueError(f"arrays must be one of {list(ARRAY_KINDS)}, got {kind!r}")


def export(t: torch.Tensor, kind: ArrayKind) -> Any:
    """``t`` as the adapter hands it out: itself (torch), or a numpy array sharing its memory (a CPU
    tensor) or a host copy of it (a CUDA tensor)."""
    if kind == "torch":
        return t
    t = t.detach()
    return t.numpy() if t.device.type == "cpu" else t.cpu().numpy()


def import_actions(
    actions: Any, shape: tuple[int, ...], device: torch.device, name: str = "actions"
) -> torch.Tensor:
    """Actions (numpy array, tensor or nested sequence) as a float32 tensor of ``shape`` on
    ``device`` (no copy for a float32 tensor already there; a tensor that requires grad is
    detached): :func:`scenefactory.inputs.as_actions`, whose ``ArgumentError`` (a ``ValueError``)
    names ``name``, the expected and the given shape, dtype or device."""
    return as_actions(actions, shape, device, name)


def check_seed(seed: Any) -> int | None:
    """A ``reset(seed=...)`` argument: ``None`` or an integer in the CLI's ``--seed`` bounds
    ([0, 2**32 - 1], :data:`scenefactory.bounds.SEED`); ``ArgumentError`` naming ``seed`` otherwise."""
    return None if seed is None else SEED.check(seed, "reset(seed=...)")
