"""One run per ``--out`` folder: a lock file held while a command writes there.

Two runs given the same ``--out`` folder used to both succeed, leaving one run's ``config.json``
beside the other's checkpoints and history (found by the second probe, issue 49). A command whose
``--out`` is a folder now creates ``OUT/.scenefactory.lock`` (exclusively, holding its process id)
before it starts and removes it when it ends, however it ends; a second run finds it and stops with
one line naming the folder and the process. A lock left by a process that no longer exists (a killed
run) is taken over. Under ``torchrun`` only rank 0 writes, so only rank 0 holds the lock. ``--out``
files (``bench drive``, ``render drive``: ``argtypes.FILE_OUTPUTS``) are written whole by a rename
and need none.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scenefactory.errors import UserError

LOCK_NAME = ".scenefactory.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(lock: Path) -> int | None:
    """The process id in ``lock``; ``None`` when it cannot be read (being written, or damaged)."""
    try:
        return int(lock.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


@contextmanager
def out_lock(out: object, folder: bool = True, rank: int = 0) -> Iterator[None]:
    """Hold ``out``'s lock for the ``with`` block when ``out`` is a folder (``folder``: the command's
    ``--out`` kind) and this is rank 0; ``UserError`` naming the folder when a live process holds
    it. A folder created for the lock and left empty by the command is removed again."""
    if not folder or not isinstance(out, str | os.PathLike) or rank != 0:
        yield
        return
    path = Path(out)
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    lock = path / LOCK_NAME
    try:
        fd = _take(lock, path)
    except BaseException:
        if created:
            _remove_if_empty(path)
        raise
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(str(os.getpid()))
    try:
        yield
    finally:
        if _holder(lock) == os.getpid():
            lock.unlink(missing_ok=True)
        if created:
            _remove_if_empty(path)


def _take(lock: Path, path: Path) -> int:
    """Create ``lock`` exclusively (taking over one whose process is gone); its descriptor."""
    for _ in range(2):
        try:
            return os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pid = _holder(lock)
            if pid is None or _alive(pid):
                who = f"process {pid}" if pid is not None else "another process"
                raise UserError(
                    f"--out {path}: another scenefactory run ({who}) is writing there; expected a"
                    f" folder no other run uses (or remove {lock} if that run is gone)"
                ) from None
            lock.unlink(missing_ok=True)  # its run was killed: take it over
    raise UserError(f"--out {path}: could not take its lock {lock}")


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: the command wrote there, keep it
        path.rmdir()
