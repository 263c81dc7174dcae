"""Data-parallel training under ``torchrun``: which process this is, the process group, and the
few collectives the trainer needs beyond rsl-rl's own.

``torchrun --nproc_per_node N -m scenefactory train drive ...`` starts N processes (ranks) with
``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (and ``MASTER_ADDR`` / ``MASTER_PORT``) set;
:func:`setup` reads them and initializes ``torch.distributed``: gloo on the CPU, NCCL on CUDA
(``SCENEFACTORY_DIST_BACKEND=gloo`` shares one GPU between ranks, which NCCL refuses). Each rank
simulates ``1/N`` of the run's worlds (or robots), seeded ``seed + rank``; rsl-rl's PPO, given
:meth:`Ranks.rsl_multi_gpu`, averages the gradients of every mini-batch over the ranks
(``reduce_parameters``), averages the KL divergence that sets the adaptive learning rate, and its
observation normalizers pool their statistics; the trainer broadcasts rank 0's parameters before
the first update (``broadcast_parameters``), so every rank holds the same networks throughout.
Only rank 0 writes files (checkpoints, history, TensorBoard, plots) and prints progress.

A process that ``torchrun`` did not start (no ``WORLD_SIZE``, or ``WORLD_SIZE=1``) is
:data:`SINGLE`: every collective here is then the identity, and training is exactly what it was.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist

from scenefactory.errors import CheckpointError, UserError

BACKEND_ENV = "SCENEFACTORY_DIST_BACKEND"
"""Environment variable that overrides the backend chosen from the device (``gloo`` or ``nccl``)."""
BACKENDS = ("gloo", "nccl")


@dataclass(frozen=True)
class Ranks:
    """This process's place in a data-parallel run (``torchrun``'s ``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``) and the collectives over all of them; one process alone is :data:`SINGLE`."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None
    """``gloo`` or ``nccl`` once :func:`setup` initialized the process group (``None``: one process)."""

    @property
    def main(self) -> bool:
        """Whether this is rank 0, the one that writes files and prints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """Whether more than one process trains together."""
        return self.world_size > 1

    # ----------------------------------------------------------------------------- set-up

    def share(self, total: int, name: str) -> int:
        """This rank's part of ``total`` (worlds, robots): ``total / world_size``; a
        :class:`UserError` naming ``name`` when it does not divide."""
        if total % self.world_size:
            raise UserError(
                f"{name} {total} does not divide among {self.world_size} training processes "
                f"(torchrun --nproc_per_node): each rank simulates {name} / {self.world_size}; "
                f"give a multiple of {self.world_size}"
            )
        return total // self.world_size

    def seed(self, seed: int) -> int:
        """The seed of this rank's worlds and generators: ``seed + rank`` (rank 0: ``seed``)."""
        return seed + self.rank

    def device(self, device: str | torch.device = "cpu") -> torch.device:
        """This rank's device for a run on ``device``: the CPU, or CUDA device ``LOCAL_RANK`` (modulo
        the devices there are, when gloo shares them)."""
        dev = torch.device(device)
        if dev.type != "cuda" or not self.distributed or dev.index is not None:
            return dev
        return torch.device("cuda", self.local_rank % max(1, torch.cuda.device_count()))

    def rsl_multi_gpu(self) -> dict[str, int] | None:
        """rsl-rl's ``multi_gpu`` config (``None`` for one process)."""
        if not self.distributed:
            return None
        return {"global_rank": self.rank, "local_rank": self.local_rank, "world_size": self.world_size}

    # ---------------------------------------------------------------------------- collectives

    def _comm_device(self) -> torch.device:
        """Where this backend's tensors live: CUDA for NCCL, the CPU for gloo."""
        return (
            torch.device("cuda", torch.cuda.current_device())
            if self.backend == "nccl"
            else torch.device("cpu")
        )

    def sum(self, values: Sequence[float]) -> list[float]:
        """Each of ``values`` summed over the ranks (float64)."""
        if not self.distributed:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self._comm_device())
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return [float(v) for v in t.cpu()]

    def mean(self, values: Sequence[float]) -> list[float]:
        """Each of ``values`` averaged over the ranks."""
        return [v / self.world_size for v in self.sum(values)]

    def all_gather(self, obj: Any) -> list[Any]:
        """``obj`` of every rank, in rank order (``[obj]`` for one process); tensors are moved to the
        CPU first."""
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, to_cpu(obj))
        return out

    def gather_to_main(self, obj: Any) -> list[Any] | None:
        """``obj`` of every rank, in rank order, on rank 0 (``None`` on the others); tensors are moved
        to the CPU first."""
        if not self.distributed:
            return [obj]
        out: list[Any] | None = [None] * self.world_size if self.main else None
        dist.gather_object(to_cpu(obj), out, dst=0)
        return out

    def cat(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` (n_r, ...) of every rank concatenated in rank order (on ``values``' device)."""
        if not self.distributed:
            return values
        return torch.cat([p.to(values.device) for p in self.all_gather(values)])

    def mean_std(self, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and (unbiased) standard deviation of ``values`` (n_r,) pooled over the ranks, as 0-d
        tensors on ``values``' device (mean 0 without values, std 1 with fewer than two)."""
        n, s, ss = self.sum([values.numel(), float(values.sum()), float(values.double().square().sum())])
        mean = s / n if n else 0.0
        var = (ss - n * mean * mean) / (n - 1) if n > 1 else 1.0
        like = values.new_zeros(())
        return like + mean, like + max(var, 0.0) ** 0.5

    def own_state(self, path: str | os.PathLike[str], saved: Mapping[str, Any]) -> dict[str, Any]:
        """The checkpoint at ``path`` as this rank resumes it: rank 0's fields, with rank ``r``'s own
        saved worlds, generators and running sums (``rank_states[r - 1]``) in their place on rank
        ``r > 0``; a :class:`CheckpointError` when they are missing."""
        data = dict(saved)
        if self.rank:
            states = data.get("rank_states")
            mine = states[self.rank - 1] if isinstance(states, list) and len(states) >= self.rank else None
            if not isinstance(mine, dict):
                raise CheckpointError(
                    f"{path}: checkpoint field 'rank_states' lacks rank {self.rank}'s state"
                )
            data.update(mine)
        return data


SINGLE = Ranks()
"""One process alone: not distributed."""


def to_cpu(obj: Any) -> Any:
    """``obj`` with every tensor in it (in dicts, lists and tuples) moved to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, Mapping):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        items = [to_cpu(v) for v in obj]
        return items if isinstance(obj, list) else tuple(items)
    return obj


def _env_int(environ: Mapping[str, str], name: str, default: int | None) -> int:
    text = environ.get(name)
    if text is None or not text.strip():
        if default is None:
            raise UserError(f"{name} is not set: start data-parallel training with torchrun")
        return default
    try:
        return int(text)
    except ValueError:
        raise UserError(f"{name}={text!r} is not an integer (torchrun sets it)") from None


def ranks_from_environ(environ: Mapping[str, str] | None = None) -> Ranks:
    """This process's rank from ``torchrun``'s environment (:data:`SINGLE` without one, or with
    ``WORLD_SIZE=1``); a :class:`UserError` naming the variable when it does not check."""
    env = os.environ if environ is None else environ
    world = _env_int(env, "WORLD_SIZE", 1)
    if world < 1:
        raise UserError(f"WORLD_SIZE={world}: expected a positive number of processes")
    if world == 1:
        return SINGLE
    rank = _env_int(env, "RANK", None)
    local = _env_int(env, "LOCAL_RANK", rank)
    if not 0 <= rank < world or not 0 <= local < world:
        raise UserError(f"RANK={rank}, LOCAL_RANK={local}: expected 0 <= rank < WORLD_SIZE={world}")
    return Ranks(rank=rank, world_size=world, local_rank=local)


def choose_backend(device: str | torch.device, requested: str | None) -> str:
    """The process group's backend for a run on ``device``: ``requested`` (``SCENEFACTORY_DIST_BACKEND``)
    or gloo on the CPU and NCCL on CUDA; a :class:`UserError` when it cannot work there."""
    dev = torch.device(device)
    text = (requested or "").strip().lower()
    if text and text not in BACKENDS:
        raise UserError(f"{BACKEND_ENV}={requested!r}: expected one of {', '.join(BACKENDS)}")
    backend = text or ("nccl" if dev.type == "cuda" else "gloo")
    if backend == "nccl" and dev.type != "cuda":
        raise UserError(
            f"{BACKEND_ENV}=nccl with the run on {dev.type}: NCCL reduces CUDA tensors only; train on "
            "--device cuda, or use gloo on the CPU"
        )
    if backend == "nccl" and not (torch.cuda.is_available() and dist.is_nccl_available()):
        raise UserError("the NCCL backend needs CUDA and a torch built with NCCL; neither is here")
    if backend == "gloo" and not dist.is_gloo_available():
        raise UserError("the gloo backend is not built into this torch")
    return backend


def setup(device: str | torch.device = "cpu", environ: Mapping[str, str] | None = None) -> Ranks:
    """This process's :class:`Ranks`, the process group initialized for it (once; ``env://`` from
    ``torchrun``'s variables) when more than one process trains; :data:`SINGLE` otherwise."""
    env = os.environ if environ is None else environ
    ranks = ranks_from_environ(env)
    if not ranks.distributed:
        return ranks
    backend = choose_backend(device, env.get(BACKEND_ENV))
    if backend == "nccl":
        count = torch.cuda.device_count()
        if ranks.local_rank >= count:
            raise UserError(
                f"LOCAL_RANK {ranks.local_rank} with {count} CUDA device(s): NCCL needs a device per "
                f"rank on a node; use {BACKEND_ENV}=gloo to share them, or fewer --nproc_per_node"
            )
        torch.cuda.set_device(ranks.local_rank)
    if dist.is_initialized():
        have = (dist.get_backend(), dist.get_rank(), dist.get_world_size())
        if have != (backend, ranks.rank, ranks.world_size):
            raise UserError(
                f"torch.distributed is already initialized as {have[0]}, rank {have[1]} of {have[2]}; "
                f"this run needs {backend}, rank {ranks.rank} of {ranks.world_size}"
            )
    else:
        try:
            dist.init_process_group(backend=backend, rank=ranks.rank, world_size=ranks.world_size)
        except (ValueError, RuntimeError) as exc:
            msg = " ".join(str(exc).split())[:200]
            raise UserError(
                f"cannot start the {backend} process group (torchrun's environment): {msg}"
            ) from None
    return replace(ranks, backend=backend)


def shutdown() -> None:
    """Leave the process group (if this process joined one)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
