"""Where an experiment's trainings and evaluations run: one after the other in this process
(:data:`LOCAL`), or all at once as Ray tasks on an existing cluster (``experiment NAME --ray
ADDRESS``, :class:`RayCluster`).

An experiment hands its work over as :class:`Job` lists (each training of a (kind, seed), each
evaluation of a policy) and gets the results back in order; what it writes from them (``metrics``
files, ``results.json``, the report) the driver writes, atomically, as without Ray. A training job
writes its own run folder (``out/train/<kind>_s<seed>``: checkpoints, atomically, as every training
does), so a stopped experiment resumes as it does without Ray: finished trainings are reused,
stopped ones continue from their last checkpoint. Hence the experiment's ``--out`` folder must be
on storage every node of the cluster mounts at the same path (a shared filesystem, or a
one-machine cluster); :class:`RayCluster` checks this on every node before it runs anything.

A job that fails on the cluster does not stop the others: all finish, then one
:class:`ClusterJobError` names each failed job (its kind and seed, or its policy and engine) with
its error and worker, and ``out/ray_failures.log`` holds their tracebacks.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from scenefactory.errors import UserError
from scenefactory.io import atomic_write_text
from scenefactory.scenes.womd.batch import check_ray_address

R = TypeVar("R")

CPUS_PER_JOB = 1
"""CPUs Ray reserves for each job (a training or evaluation runs one torch thread)."""
FAILURE_LOG = "ray_failures.log"


@dataclass(frozen=True)
class Job(Generic[R]):
    """One piece of an experiment's work: ``fn(*args)``, said as ``what`` (``training (kinematic,
    seed 0)``) in progress and failure messages. ``fn`` is a module-level function and ``args``
    plain data (configs, paths, scenes): Ray ships them to a worker."""

    what: str
    fn: Callable[..., R]
    args: tuple[Any, ...] = field(default=())


class Executor(Protocol):
    """Runs jobs and returns their results in the jobs' order."""

    remote: bool
    """Whether the jobs run in other processes (their own progress lines then go to the workers' logs)."""

    def run(self, jobs: Sequence[Job[R]], on_done: Callable[[int, R], None] | None = None) -> list[R]:
        """Every job's result in order; ``on_done(i, result)`` as each is in."""
        ...


class Local:
    """Each job in turn, in this process: an experiment as it ran before Ray."""

    remote = False

    def run(self, jobs: Sequence[Job[R]], on_done: Callable[[int, R], None] | None = None) -> list[R]:
        """Every job's result in order; an error stops the run."""
        out = []
        for i, job in enumerate(jobs):
            result = job.fn(*job.args)
            out.append(result)
            if on_done is not None:
                on_done(i, result)
        return out


LOCAL = Local()


class ClusterJobError(UserError):
    """Jobs that failed on the Ray cluster, each named (the others finished)."""


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


@dataclass(frozen=True)
class Outcome:
    """What a job on a Ray worker gave: its ``value``, or the ``error`` it raised (type and message,
    one line) with its ``trace``, and where it ran."""

    value: Any = None
    error: str | None = None
    trace: str = ""
    where: str = ""


def _call(fn: Callable[..., Any], *args: Any) -> Outcome:
    """A job on a Ray worker; its exception is part of the outcome (named by the driver)."""
    import socket
    import traceback

    where = f"worker pid {os.getpid()} on {socket.gethostname()}"
    try:
        return Outcome(value=fn(*args), where=where)
    except Exception as exc:
        error = f"{type(exc).__name__}: {_one_line(str(exc))}"
        return Outcome(error=error, trace=traceback.format_exc(), where=where)


def _sees(path: str, token: str) -> str:
    """A probe on one node: the token read from ``path``, or why not (the node's hostname first)."""
    import socket

    try:
        text = Path(path).read_text()
    except OSError as exc:
        text = f"cannot read it ({type(exc).__name__}: {exc})"
    return f"{socket.gethostname()}\n{'ok' if text == token else text}"


class RayCluster:
    """Jobs as Ray tasks (:data:`CPUS_PER_JOB` CPUs each) on the running cluster at ``address``,
    all submitted at once; ``out`` is the experiment's folder, which every node must see."""

    remote = True

    def __init__(self, address: str, out: Path) -> None:
        """Connect (a :class:`UserError` naming ``--ray`` when nothing answers there) and check that
        every node can import scenefactory and read ``out``."""
        check_ray_address(address)  # ray.init would retry an unreachable address for minutes
        import ray

        try:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UserError(f"--ray {address!r}: cannot connect to a Ray cluster there ({exc})") from None
        self.address, self.out = address, Path(out)
        self._check_nodes()

    def _check_nodes(self) -> None:
        """One probe per live node: it reads a token the driver wrote into ``out``."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.out.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex
        probe = self.out / f".ray-probe-{token}"
        atomic_write_text(probe, token)
        try:
            nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
            remote = ray.remote(num_cpus=0)(_sees)
            refs = [
                remote.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
                ).remote(str(probe.resolve()), token)
                for n in nodes
            ]
            for node, ref in zip(nodes, refs, strict=True):
                try:
                    host, seen = ray.get(ref).split("\n", 1)
                except ray.exceptions.RayError as exc:
                    raise UserError(
                        f"--ray {self.address!r}: node {node.get('NodeManagerAddress')} cannot run "
                        f"scenefactory's tasks (is scenefactory installed there, the same version?): "
                        f"{_one_line(str(exc))}"
                    ) from None
                if seen != "ok":
                    raise UserError(
                        f"--ray {self.address!r}: node {host} does not see the experiment's folder "
                        f"{probe.parent.resolve()} ({_one_line(seen)}); --out must be on storage every "
                        "node mounts at the same path"
                    )
        finally:
            probe.unlink(missing_ok=True)

    def run(self, jobs: Sequence[Job[R]], on_done: Callable[[int, R], None] | None = None) -> list[R]:
        """Every job's result in order, after all finished; the failed ones are one
        :class:`ClusterJobError` naming each (tracebacks in ``out/ray_failures.log``). Ctrl-C cancels
        the jobs still queued or running."""
        import ray

        remote = ray.remote(num_cpus=CPUS_PER_JOB)(_call)
        refs = [remote.remote(job.fn, *job.args) for job in jobs]
        results: list[Any] = [None] * len(jobs)
        failures: list[tuple[str, str]] = []
        try:
            for i, ref in enumerate(refs):
                try:
                    outcome: Outcome = ray.get(ref)
                except ray.exceptions.RayError as exc:  # a worker or node died, the task was lost
                    message = f"{type(exc).__name__}: {_one_line(str(exc))}"
                    failures.append((f"{jobs[i].what}: {message}", str(exc)))
                    continue
                if outcome.error is not None:
                    failures.append((f"{jobs[i].what}: {outcome.error} ({outcome.where})", outcome.trace))
                    continue
                results[i] = outcome.value
                if on_done is not None:
                    on_done(i, results[i])
        except KeyboardInterrupt:
            for ref in refs:
                ray.cancel(ref, force=True)
            raise
        if failures:
            log = self.out / FAILURE_LOG
            atomic_write_text(log, "".join(f"== {what}\n{trace}\n" for what, trace in failures))
            raise ClusterJobError(
                f"{len(failures)} of {len(jobs)} jobs failed on the Ray cluster (the others finished; rerun "
                f"the same command to resume): "
                + "; ".join(what for what, _ in failures)
                + f" (tracebacks: {log})"
            )
        return results


_CLUSTERS: dict[tuple[str, str], RayCluster] = {}


def executor_for(ray_address: str | None, out: Path) -> Executor:
    """:data:`LOCAL` without an address; else the cluster at ``ray_address`` for the experiment in
    ``out`` (connected and checked once per process)."""
    if ray_address is None:
        return LOCAL
    key = (ray_address, os.fspath(Path(out).resolve()))
    if key not in _CLUSTERS:
        _CLUSTERS[key] = RayCluster(ray_address, Path(out))
    return _CLUSTERS[key]
