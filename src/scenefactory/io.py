"""Atomic file writes: results and checkpoints are never half-written."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    """The process's file-creation mask: from ``/proc/self/status`` on Linux (reading it does not
    change it), else by setting it and putting it back."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, then rename)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename). The file gets
    the permissions a plain ``open(path, "w")`` would give it (``0o666`` less the umask), not the
    owner-only ``0o600`` of a temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_safe(data: Any) -> Any:
    """``data`` with non-finite floats replaced by ``None`` (strict JSON has no NaN or Infinity)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {str(k): json_safe(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [json_safe(v) for v in data]
    return data


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write ``data`` as indented, strict JSON (NaN/inf → null), atomically."""
    atomic_write_text(path, json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n")


def show_value(value: Any, limit: int = 60) -> str:
    """A value as JSON (as the user wrote it), shortened to ``limit`` characters, for one-line
    error messages."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
