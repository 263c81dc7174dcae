"""Local worker processes for ``convert``: one input file per task, results streamed back record by
record, a crashed worker costing one record, and no worker outliving the run.

- **Protocol.** The parent sends a :class:`ShardTask` down a worker's pipe; the worker runs the job,
  which sends one dict per event (``kind`` ``begin`` before each record, then that record's result;
  see :mod:`scenefactory.scenes.womd.batch`), then :data:`DONE`. ``None`` tells it to exit.
- **Crashes.** If a worker dies (killed for memory, a crash in native code), the record it had
  begun is reported as an error and a new worker converts the rest of the file from the next
  record; a worker that dies outside any record costs the rest of its file, reported as well.
- **Ending.** Workers ignore SIGINT (a Ctrl-C reaches the whole process group; the parent decides).
  On SIGTERM a worker finishes the record it is on, sends its result and exits (an idle one exits
  at once), so a scene file on disk is always one the parent heard of. On any exit from
  :func:`run_in_processes` — done, an exception, an interrupt — the parent sends SIGTERM to every
  worker, keeps reading their results, and SIGKILLs any still running after
  :data:`TERMINATE_GRACE_S`. On Linux each worker also asks the kernel for SIGTERM when its parent
  dies, so even a SIGKILLed ``convert`` leaves none running.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

from scenefactory.scenes.scene import Scene

Emit = Callable[[dict[str, Any]], None]
DONE = "done"
TERMINATE_GRACE_S = 2.0
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


@dataclass(frozen=True)
class ShardTask:
    """One input file to convert.

    Attributes:
        path: the input file (TFRecord shard or GPUDrive JSON).
        out: the output folder.
        formats: subset of ``("json", "mjcf", "usd")``.
        max_agents: controlled agents per scene at most.
        claims: folder of this run's file-name claims (duplicate detection), or ``None``.
        start_record: records with a lower index are skipped (set when resuming after a crash).
        prepare_scene: run on each scene written (a module-level function, so that the task pickles),
            e.g. :func:`scenefactory.tasks.driving.road_cache.warm` to build the road data once, in
            the workers, instead of at the first training run.
    """

    path: str
    out: str
    formats: tuple[str, ...]
    max_agents: int
    claims: str | None = None
    start_record: int = 0
    prepare_scene: Callable[[Scene], None] | None = None


Job = Callable[[ShardTask, Emit], object]


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    task: ShardTask | None = None
    begun: dict[str, Any] | None = field(default=None)  # the record it is converting, if any


class _WorkerState:
    """Set by the worker loop and read by its SIGTERM handler."""

    busy = False  # converting a task: finish the current record first
    stopping = False


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _WorkerState.stopping = True
    if not _WorkerState.busy:
        raise SystemExit(128 + signum)


def _die_with_parent(parent_pid: int) -> None:
    """Have Linux send this process SIGTERM when its parent dies (even by SIGKILL); exit if it has."""
    if sys.platform.startswith("linux"):
        # Without prctl (not glibc) the parent's own cleanup still ends the workers.
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:
        os._exit(1)


def _worker_main(conn: Connection, parent_pid: int, job: Job) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    _die_with_parent(parent_pid)

    def send(msg: Any) -> None:
        if _WorkerState.stopping and isinstance(msg, dict) and msg.get("kind") == "begin":
            raise SystemExit(128 + signal.SIGTERM)  # asked to stop: do not start another record
        try:
            conn.send(msg)
        except OSError:  # the parent is gone
            raise SystemExit(1) from None

    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        _WorkerState.busy = True
        job(task, send)
        send(DONE)
        _WorkerState.busy = False
        if _WorkerState.stopping:
            return


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "it stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}" + (" — out of memory?" if -code == signal.SIGKILL else "")
    return f"exit code {code}"


def run_in_processes(
    tasks: Sequence[ShardTask],
    workers: int,
    job: Job,
    on_entry: Emit,
    on_task_done: Callable[[ShardTask], None],
) -> None:
    """Run ``job`` on every task in up to ``workers`` processes (module docstring).

    ``on_entry`` gets every event a job sends (plus an ``error`` event for a worker that died) in
    the parent, as it arrives; ``on_task_done`` the original task once its file is finished.
    """
    ctx = multiprocessing.get_context()
    pending: deque[tuple[ShardTask, ShardTask]] = deque((t, t) for t in tasks)  # (original, to run)
    original: dict[int, ShardTask] = {}
    busy: list[_Worker] = []
    idle: list[_Worker] = []
    everyone: list[_Worker] = []
    try:
        while pending or busy:
            while pending and (idle or len(busy) + len(idle) < workers):
                w = idle.pop() if idle else _start(ctx, job, everyone)
                first, task = pending[0]
                try:
                    w.conn.send(task)
                except OSError:  # it died while idle: replace it
                    everyone.remove(w)
                    _stop(w)
                    continue
                pending.popleft()
                w.task, w.begun = task, None
                original[id(w)] = first
                busy.append(w)
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            for w in list(busy):
                if _drain(w, on_entry):
                    if w.task is None:  # finished its file
                        busy.remove(w)
                        idle.append(w)
                        on_task_done(original.pop(id(w)))
                    continue
                busy.remove(w)
                everyone.remove(w)
                _stop(w)
                resume = _after_crash(w, on_entry)
                if resume is None:
                    on_task_done(original.pop(id(w)))
                else:
                    pending.appendleft((original.pop(id(w)), resume))
            while idle and not pending:  # nothing left for them
                with contextlib.suppress(OSError):
                    idle.pop().conn.send(None)
    finally:
        _shutdown(everyone, on_entry)


def _start(ctx: Any, job: Job, everyone: list[_Worker]) -> _Worker:
    parent_conn, child_conn = ctx.Pipe()
    process = ctx.Process(target=_worker_main, args=(child_conn, os.getpid(), job), daemon=True)
    process.start()
    child_conn.close()
    w = _Worker(process=process, conn=parent_conn)
    everyone.append(w)
    return w


def _drain(w: _Worker, on_entry: Emit) -> bool:
    """Pass on every event the worker has sent; ``False`` if it is gone without finishing its task."""
    alive = w.process.is_alive()  # before draining: what a dead worker sent is all in the pipe then
    try:
        while w.task is not None and w.conn.poll():
            msg = w.conn.recv()
            if msg == DONE:
                w.task = None
                break
            w.begun = msg if msg.get("kind") == "begin" else None
            on_entry(msg)
    except (EOFError, OSError):
        return False
    return w.task is None or alive


def _after_crash(w: _Worker, on_entry: Emit) -> ShardTask | None:
    """Report a dead worker's loss; the task that resumes after the record it died on, if known."""
    assert w.task is not None
    how = _describe_exit(w.process.exitcode)
    if w.begun is None:
        on_entry(
            {
                "kind": "error",
                "file": w.task.path,
                "record": None,
                "offset": None,
                "scenario_id": None,
                "error": f"{w.task.path}: the worker process died ({how}) outside any record; the rest of"
                " this file was not converted",
            }
        )
        return None
    record, offset = int(w.begun["record"]), int(w.begun["offset"])
    on_entry(
        {
            "kind": "error",
            "file": w.task.path,
            "record": record,
            "offset": offset,
            "scenario_id": None,
            "error": f"{w.task.path}: record {record} at byte offset {offset}: the worker process died"
            f" ({how}) while converting it; the file's later records go to a new worker",
        }
    )
    return replace(w.task, start_record=record + 1)


def _stop(w: _Worker) -> None:
    w.process.join(TERMINATE_GRACE_S)
    if w.process.is_alive():
        w.process.kill()
        w.process.join()
    w.conn.close()


def _read_rest(w: _Worker, on_entry: Emit) -> None:
    try:
        while w.conn.poll():
            msg = w.conn.recv()
            if msg != DONE:
                on_entry(msg)
    except (EOFError, OSError):
        pass


def _shutdown(workers: list[_Worker], on_entry: Emit) -> None:
    """SIGTERM every worker, pass on what they still send, SIGKILL those that outlast the grace period."""
    for w in workers:
        if w.process.is_alive():
            w.process.terminate()
    deadline = time.monotonic() + TERMINATE_GRACE_S
    alive = workers
    while alive:
        for w in alive:
            _read_rest(w, on_entry)
        alive = [w for w in alive if w.process.is_alive()]
        left = deadline - time.monotonic()
        if alive and left <= 0:
            break
        if alive:
            wait([w.conn for w in alive] + [w.process.sentinel for w in alive], timeout=left)
    for w in workers:
        if w.process.is_alive():
            w.process.kill()
        w.process.join()
        _read_rest(w, on_entry)
        w.conn.close()
