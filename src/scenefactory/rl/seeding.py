"""Seeding and the state of the global random generators (torch, numpy, python) as plain data, so a
training run can be resumed bit for bit (checkpoints hold no pickled objects)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.errors import CheckpointError


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def global_rng_state() -> dict[str, Any]:
    """The state of every global random generator (torch, numpy, python) as plain data."""
    np_state: Any = np.random.get_state()
    _, keys, pos, has_gauss, cached = np_state
    return {
        "torch": torch.get_rng_state(),
        "numpy": [torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "python": random.getstate(),
    }


def set_global_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`global_rng_state`."""
    torch.set_rng_state(state["torch"])
    keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state(("MT19937", keys.numpy().astype(np.uint32), int(pos), int(has_gauss), float(cached)))
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))


def require_generator_state(path: str | Path, name: str, value: Any) -> None:
    """A torch CPU generator's state: a uint8 tensor of the size ``get_state`` gives, or a
    :class:`CheckpointError` naming the checkpoint field ``name``."""
    size = torch.get_rng_state().numel()
    if not isinstance(value, torch.Tensor) or value.dtype != torch.uint8 or value.numel() != size:
        raise CheckpointError(
            f"{path}: checkpoint field '{name}' is not a torch generator state ({size} bytes)"
        )


def require_global_rng_state(path: str | Path, name: str, value: Any) -> None:
    """:func:`global_rng_state`'s form (torch, numpy and python states), or a
    :class:`CheckpointError` naming the checkpoint field ``name``."""
    rng = value if isinstance(value, dict) else {}
    require_generator_state(path, f"{name}.torch", rng.get("torch"))
    numpy_state: Any = rng.get("numpy")
    python_state: Any = rng.get("python")
    numpy_ok = isinstance(numpy_state, list | tuple) and len(numpy_state) == 4
    numpy_ok = numpy_ok and isinstance(numpy_state[0], torch.Tensor) and numpy_state[0].numel() == 624
    if not numpy_ok or not (isinstance(python_state, list | tuple) and len(python_state) == 3):
        raise CheckpointError(
            f"{path}: checkpoint field '{name}' is not the torch/numpy/python generator states"
        )
