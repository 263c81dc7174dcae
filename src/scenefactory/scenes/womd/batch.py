"""Bulk conversion of WOMD scenario shards (TFRecord of ``Scenario`` or flat ``tf.train.Example``
records, judged record by record, or GPUDrive/Nocturne ``*.json`` files) into scene files, one
input file per worker process.

What ``convert`` guarantees — one bad record costs that record only:

- **Records.** Each shard is read record by record (never whole) with
  :func:`~scenefactory.scenes.womd.tfrecord.scan_records`: a bad CRC, a truncation, an empty or
  unparsable payload is an error for that stretch of the file and reading goes on at the next
  valid record.
- **Scenarios.** Anything that goes wrong inside one scenario — implausible or non-finite values,
  a ``current_time_index`` outside its steps, a failure while converting or writing it, its worker
  process dying — is that scenario's error. A scenario that cannot become a scene (no drivable
  lane, no controllable agent) or repeats a scenario id already converted in this run is skipped
  with its reason. Every error and skip names the file, record index and byte offset.
- **Outputs.** Each scene is written atomically as ``json/<stem>.json`` (plus ``mjcf/<stem>.xml``,
  ``usd/<stem>.usda`` when asked), ``<stem>`` from :func:`scene_file_stem`, only after the checks
  ``load_scene`` applies pass. ``index.json`` (every scene written, merged with an existing index)
  and ``summary.json`` (read, converted, skipped, errors, warnings, and ``agents``: how many logged
  objects the converted scenes control, replay and leave out, and why — :func:`agent_totals`) are
  written at the end of every run, an interrupted one included; an empty TFRecord file is a
  warning.
- **Splits.** Every scene of ``index.json`` has a ``split``, ``"train"`` or ``"eval"``, decided by
  its scenario id alone (:func:`scene_split`), so that re-converting, converting the shards in
  another order, with more workers or after renaming them gives every scene the same split; the
  index records the ``eval_fraction`` used (every entry is re-split with it) and ``summary.json``
  the counts per split of the scenes this run converted.
- **Processes.** SIGINT or SIGTERM ends the workers (see :mod:`scenefactory.scenes.womd.pool`),
  writes the two files and raises :class:`ConvertInterrupted`.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import signal
import socket
import string
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from scenefactory.errors import SceneFormatError, UserError
from scenefactory.io import write_json
from scenefactory.scenes.plausibility import WARNED
from scenefactory.scenes.scene import Scene
from scenefactory.scenes.scene_checks import scene_warnings
from scenefactory.scenes.scene_json import save_scene
from scenefactory.scenes.womd.convert import (
    REASONS,
    ScenarioConversionError,
    ScenarioValueError,
    scenario_to_scene,
)
from scenefactory.scenes.womd.gpudrive_json import load_gpudrive_json
from scenefactory.scenes.womd.pool import Emit, ShardTask, run_in_processes
from scenefactory.scenes.womd.scenario_pb2 import Scenario
from scenefactory.scenes.womd.tf_example import parse_womd_record
from scenefactory.scenes.womd.tfrecord import CorruptRecordError, RecordFault, scan_records

FORMATS = ("json", "mjcf", "usd")
SPLITS = ("train", "eval")
DEFAULT_EVAL_FRACTION = 0.1
MAX_STEM_CHARS = 100  # + "-" + 12 hex digits + ".usda" stays far below the usual 255-byte name limit
_SAFE_CHARS = frozenset(string.ascii_letters + string.digits + "-_.")
_EXTENSIONS = {"json": ("json", "json"), "mjcf": ("mjcf", "xml"), "usd": ("usd", "usda")}


class ConvertInterrupted(KeyboardInterrupt):
    """``convert`` stopped by SIGINT or SIGTERM (``signum``) after ending its workers and writing
    ``summary.json`` and ``index.json``."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


def expand_inputs(patterns: Sequence[str | Path]) -> list[Path]:
    """Files named or matched by ``patterns``, sorted, duplicates removed.

    A string may be a glob; folders it matches are passed over (``womd/*`` beside an output folder
    is fine), but one that matches no file is a user error. A :class:`~pathlib.Path` is taken
    literally. A named input that is not a file is a user error.
    """
    files: set[Path] = set()
    for pattern in patterns:
        if isinstance(pattern, str) and glob.has_magic(pattern):
            matches = [Path(m) for m in glob.glob(pattern, recursive=True)]
            found = [m for m in matches if m.is_file()]
            if not found:
                raise UserError(f"no input file matches '{pattern}'")
            files.update(found)
            continue
        path = Path(pattern)
        if not path.is_file():
            what = "does not exist" if not path.exists() else "is not a file"
            raise UserError(
                f"input '{path}' {what} (expected WOMD TFRecord shards or GPUDrive JSON scenarios)"
            )
        files.add(path)
    return sorted(files)


def parse_formats(text: str) -> tuple[str, ...]:
    """``"json,mjcf"`` → ``("json", "mjcf")``; unknown names are a user error."""
    formats = tuple(f.strip() for f in text.split(",") if f.strip())
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise UserError(f"--format {text!r}: expected a comma-separated subset of {', '.join(FORMATS)}")
    return formats


def scene_file_stem(name: str) -> str:
    """The file name (without extension) of the scene called ``name``.

    ``name`` itself when it is 1 to :data:`MAX_STEM_CHARS` characters of ``[A-Za-z0-9._-]`` not
    starting with ``.`` (every real WOMD scenario id); otherwise those characters (any other as
    ``_``, cut to :data:`MAX_STEM_CHARS`), ``-`` and the first 12 hex digits of the name's SHA-256,
    so that distinct names get distinct files and any name fits a file system's name limit.
    """
    if 0 < len(name) <= MAX_STEM_CHARS and name[0] != "." and all(c in _SAFE_CHARS for c in name):
        return name
    safe = "".join(c if c in _SAFE_CHARS else "_" for c in name)[:MAX_STEM_CHARS].lstrip(".")
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{safe or 'scene'}-{digest}"


def scene_split(scenario_id: str, eval_fraction: float = DEFAULT_EVAL_FRACTION) -> str:
    """``"eval"`` or ``"train"`` for a scenario id: the first 8 bytes of the SHA-256 of its UTF-8
    form, read as a big-endian integer ``h``, make it an eval scene when ``h < eval_fraction * 2**64``
    (a stable share ``eval_fraction`` of the ids, independent of files, order and workers)."""
    if not 0.0 <= eval_fraction <= 1.0:
        raise ValueError(f"eval_fraction must be in [0, 1], got {eval_fraction}")
    digest = hashlib.sha256(scenario_id.encode("utf-8", "surrogatepass")).digest()
    return "eval" if int.from_bytes(digest[:8], "big") < eval_fraction * 2.0**64 else "train"


def _where(path: str, record: int, offset: int) -> str:
    return f"{path}: record {record} at byte offset {offset}"


def _entry(
    kind: str, task: ShardTask, record: int | None, offset: int | None, **fields: Any
) -> dict[str, Any]:
    return {"kind": kind, "file": task.path, "record": record, "offset": offset, **fields}


def _failure(exc: BaseException) -> str:
    """An exception as text: a user error's message is enough, anything else also gets its type."""
    return str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"


def _records(path: str) -> Iterator[tuple[int, int, Callable[[], Scenario] | str]]:
    """``(record, offset, parse)`` per record of a file; ``parse`` is the fault message for a bad one."""
    if path.lower().endswith(".json"):
        yield 0, 0, partial(load_gpudrive_json, path)
        return
    for item in scan_records(path):
        if isinstance(item, RecordFault):
            yield item.index, item.offset, item.message
        else:
            yield (
                item.index,
                item.offset,
                partial(parse_womd_record, item.data, _where(path, item.index, item.offset)),
            )


def _claim(claims: str | None, stem: str, entry: dict[str, Any]) -> str | None:
    """Take file name ``stem`` for this run (atomic, across processes); the skip reason if taken."""
    if claims is None:
        return None
    path = Path(claims) / stem
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            first = json.loads(path.read_text())
            first_id = first["scenario_id"]
            by = f"scenario '{first_id}' from {first['file']} record {first['record']}"
        except (OSError, ValueError, KeyError, TypeError):  # the first is still writing its claim
            first_id, by = None, "another record"
        if first_id == entry["scenario_id"]:
            return f"duplicate scenario_id '{first_id}': already converted in this run ({by})"
        return f"its file name '{stem}' is already used in this run by {by}"
    with os.fdopen(fd, "w") as f:
        json.dump({k: entry[k] for k in ("scenario_id", "file", "record", "offset")}, f)
    return None


def _release(claims: str | None, stem: str) -> None:
    if claims is not None:
        (Path(claims) / stem).unlink(missing_ok=True)


def _write(scene: Scene, out: Path, formats: Sequence[str], stem: str) -> list[str]:
    written = []
    for fmt in formats:
        folder, ext = _EXTENSIONS[fmt]
        target = out / folder / f"{stem}.{ext}"
        if fmt == "json":
            save_scene(scene, target)
        elif fmt == "mjcf":
            from scenefactory.scenes.export_mjcf import save_mjcf

            save_mjcf(scene, target)
        else:
            from scenefactory.scenes.export_usd import scene_to_usd

            scene_to_usd(scene, target)
        written.append(f"{folder}/{target.name}")
    return written


def _convert_record(
    task: ShardTask, record: int, offset: int, parse: Callable[[], Scenario]
) -> dict[str, Any]:
    """The result event of one record: ``converted``, ``skipped`` or ``error``, never an exception."""
    where = _where(task.path, record, offset)
    # Every failure below is reported as this record's error, with its type when it is not a user
    # error: one bad scenario must never cost the file, the run or the summary.
    try:
        scenario = parse()
    except (CorruptRecordError, SceneFormatError) as exc:
        return _entry("error", task, record, offset, scenario_id=None, error=str(exc))
    except Exception as exc:  # reported as this record's error (see above)
        return _entry("error", task, record, offset, scenario_id=None, error=f"{where}: {_failure(exc)}")
    sid = scenario.scenario_id
    try:
        scene, report = scenario_to_scene(scenario, max_agents=task.max_agents)
    except ScenarioValueError as exc:
        return _entry("error", task, record, offset, scenario_id=sid, error=f"{where}: {exc}")
    except ScenarioConversionError as exc:
        return _entry("skipped", task, record, offset, scenario_id=sid, reason=str(exc))
    except Exception as exc:  # reported as this record's error (see above)
        msg = f"{where}: scenario '{sid}' failed to convert: {_failure(exc)}"
        return _entry("error", task, record, offset, scenario_id=sid, error=msg)
    stem = scene_file_stem(scene.name)
    converted = _entry("converted", task, record, offset, scenario_id=sid, files=[], report=asdict(report))
    converted["report"]["scene_warnings"] = scene_warnings(scene)  # kept with a warning (plausibility.WARNED)
    claimed = False
    try:
        taken = _claim(task.claims, stem, converted)
        if taken is not None:
            return _entry("skipped", task, record, offset, scenario_id=sid, reason=taken)
        claimed = True
        converted["files"] = _write(scene, Path(task.out), task.formats, stem)
    except Exception as exc:  # reported as this record's error (see above)
        if claimed:
            _release(task.claims, stem)
        msg = f"{where}: scenario '{sid}' not written: {_failure(exc)}"
        return _entry("error", task, record, offset, scenario_id=sid, error=msg)
    if task.prepare_scene is not None:
        try:
            task.prepare_scene(scene)
        except Exception as exc:  # the scene is written; whoever loads it meets the same error
            converted["warning"] = (
                f"{where}: scenario '{sid}' written, but preparing it failed: {_failure(exc)}"
            )
    return converted


def convert_shard(task: ShardTask, emit: Emit | None = None) -> dict[str, Any]:
    """Convert every record of one input file (in a worker process, or in-process).

    Every event goes to ``emit`` as it happens (``begin`` before each record, then its result:
    ``converted``, ``skipped`` or ``error``; ``warning`` for an empty file). Never raises for a bad
    input. Returns ``{"file": path, "entries": [...]}``, the events less the ``begin`` ones.
    """
    entries: list[dict[str, Any]] = []

    def put(entry: dict[str, Any]) -> None:
        if entry["kind"] != "begin":
            entries.append(entry)
        if emit is not None:
            emit(entry)

    seen = False
    try:
        for record, offset, parse in _records(task.path):
            seen = True
            if record < task.start_record:
                continue
            if isinstance(parse, str):
                put(_entry("error", task, record, offset, scenario_id=None, error=parse))
                continue
            put(_entry("begin", task, record, offset))
            put(_convert_record(task, record, offset, parse))
        if not seen:
            put(
                {
                    "kind": "warning",
                    "file": task.path,
                    "message": f"{task.path}: empty TFRecord file (no records)",
                }
            )
    except Exception as exc:  # the file cannot be opened or read on: its error, not the run's
        put(_entry("error", task, None, None, scenario_id=None, error=f"{task.path}: {_failure(exc)}"))
    return {"file": task.path, "entries": entries}


RAY_CONNECT_TIMEOUT_S = 5.0
"""How long :func:`check_ray_address` waits for a TCP connection to the Ray head [s]."""

_RAY_FORMS = (
    "expected HOST:PORT (the Ray head's GCS address, e.g. 10.0.0.1:6379), ray://HOST:PORT"
    " (a Ray Client server, e.g. ray://10.0.0.1:10001), auto (the cluster in RAY_ADDRESS or the"
    " last one 'ray start' started on this machine) or local (a new local Ray instance)"
)


def _one_line(exc: BaseException, limit: int = 200) -> str:
    return " ".join(str(exc).split())[:limit] or type(exc).__name__


def check_ray_address(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """``UserError`` (one line naming ``--ray``) unless the ray package is installed and something
    accepts a TCP connection at ``address`` within ``timeout_s``: ``ray.init`` itself retries an
    unreachable address for minutes. The forms are Ray's: ``HOST:PORT`` (a head's GCS),
    ``ray://HOST:PORT`` (Ray Client), ``auto`` (``RAY_ADDRESS``, else the cluster ``ray start``
    last started on this machine, found as Ray finds it) and ``local`` (started here, not checked).
    """
    try:
        import ray  # noqa: F401  (installed: the check below is the only reason to import it here)
    except ImportError as exc:
        raise UserError("--ray needs the ray package: pip install 'scenefactory[ray]'") from exc
    text = address.strip()
    if text == "local":
        return
    if text == "auto":
        text = os.environ.get("RAY_ADDRESS", "").strip()  # ray.init reads it for 'auto' first
        if not text:
            from ray._private import services

            try:
                text = str(services.canonicalize_bootstrap_address_or_die("auto"))
            except Exception as exc:  # Ray's ConnectionError, or a change in its private API
                raise UserError(
                    f"--ray auto: no running Ray cluster found (RAY_ADDRESS is unset; Ray says:"
                    f" {_one_line(exc)}); start one with 'ray start --head' or give its address"
                ) from None
    scheme, sep, rest = text.partition("://")
    if sep and scheme != "ray":
        raise UserError(f"--ray {address!r}: unsupported scheme '{scheme}://'; {_RAY_FORMS}")
    host, colon, port = (rest if sep else text).rpartition(":")
    host = host.strip().removeprefix("[").removesuffix("]")  # [IPv6]:PORT
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--ray {address!r}: not a Ray address; {_RAY_FORMS}")
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    where = shown if text == address.strip() else f"{shown} (from --ray {address})"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except socket.gaierror as exc:
        raise UserError(f"--ray {address!r}: cannot resolve host '{host}' ({_one_line(exc)})") from None
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else _one_line(exc)
        raise UserError(
            f"--ray {address!r}: no Ray cluster reachable at {where} within {timeout_s:g} s ({why});"
            " is the cluster up ('ray start --head') and the address its GCS (port 6379 by default)"
            " or Ray Client (ray://, port 10001) address?"
        ) from None


def _convert_on_ray(
    tasks: list[ShardTask], address: str, on_report: Callable[[dict[str, Any]], None]
) -> None:
    """One Ray task per shard on the cluster at ``address``; reports in completion order."""
    check_ray_address(address)  # ray.init would retry an unreachable address for minutes
    import ray

    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UserError(f"--ray {address!r}: cannot connect to a Ray cluster there ({exc})") from exc
    remote = ray.remote(convert_shard)
    pending = [remote.remote(t) for t in tasks]
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            on_report(ray.get(done[0]))
    finally:
        for ref in pending:  # interrupted: stop what is still queued or running
            ray.cancel(ref, force=True)


class _Collector:
    """The parent's record of every event, per input file, in the order they arrive."""

    def __init__(self, files: Sequence[str], on_shard: Callable[[dict[str, Any]], None] | None) -> None:
        self.entries: dict[str, list[dict[str, Any]]] = {f: [] for f in files}
        self.on_shard = on_shard

    def add(self, entry: dict[str, Any]) -> None:
        if entry["kind"] != "begin":
            self.entries[entry["file"]].append(entry)

    def add_report(self, report: dict[str, Any]) -> None:
        for entry in report["entries"]:
            self.add(entry)
        self.done(report["file"])

    def done(self, file: str) -> None:
        if self.on_shard is not None:
            self.on_shard(self.shard_report(file))

    def shard_report(self, file: str) -> dict[str, Any]:
        """``{"file", "converted", "skipped", "errors", "warnings"}`` of one input file."""
        by_kind: dict[str, list[dict[str, Any]]] = {
            "converted": [],
            "skipped": [],
            "error": [],
            "warning": [],
        }
        for e in self.entries[file]:
            by_kind[e["kind"]].append({k: v for k, v in e.items() if k != "kind"})
        for rows in by_kind.values():
            rows.sort(key=lambda e: (-1, -1) if e.get("record") is None else (e["record"], e["offset"]))
        return {
            "file": file,
            "converted": by_kind["converted"],
            "skipped": by_kind["skipped"],
            "errors": by_kind["error"],
            "warnings": [w["message"] for w in by_kind["warning"]]
            + [c["warning"] for c in by_kind["converted"] if "warning" in c],
        }


def prepare(inputs: Sequence[str | Path], out: Path) -> list[Path]:
    """Check what a conversion needs before it starts: the input files (:func:`expand_inputs`), the
    output folder (created) and its existing ``index.json``; return the input files.

    Raises:
        UserError: naming the input, folder or file that is wrong.
    """
    files = expand_inputs(inputs)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"--out {str(out)!r}: cannot create the output folder ({exc.strerror or exc})"
        ) from exc
    _read_index(out)
    return files


def _read_index(out: Path) -> dict[str, Any]:
    index_path = out / "index.json"
    if not index_path.exists():
        return {"scenes": {}}
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(
            f"{index_path}: cannot read the existing index ({exc}); move it away or use another --out"
        ) from exc
    if not isinstance(index, dict) or not isinstance(index.get("scenes"), dict):
        raise UserError(
            f"{index_path}: expected an object with a 'scenes' object; move it away or use another --out"
        )
    return index


class _Stop:
    """A SIGINT or SIGTERM received inside :func:`_interrupts` (``signum``), and whether its
    :class:`ConvertInterrupted` waits for the next :meth:`check` (``defer``)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.defer = False

    def check(self) -> None:
        if self.signum is not None:
            raise ConvertInterrupted(self.signum)


@contextmanager
def _interrupts() -> Iterator[_Stop]:
    """While inside (main thread only): SIGINT and SIGTERM raise :class:`ConvertInterrupted` at once,
    or, while ``stop.defer`` is set, at the next ``stop.check()``. A second signal of the same kind
    gets its previous handling back (a second Ctrl-C stops at once)."""
    stop = _Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous: dict[int, Any] = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signum, previous[signum] or signal.SIG_DFL)
        stop.signum = signum
        if not stop.defer:
            raise ConvertInterrupted(signum)

    for s in previous:
        signal.signal(s, handler)
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h or signal.SIG_DFL)


def convert_files(
    inputs: Sequence[str | Path],
    out: Path,
    formats: Sequence[str] = ("json",),
    workers: int = 1,
    max_agents: int = 32,
    on_shard: Callable[[dict[str, Any]], None] | None = None,
    ray_address: str | None = None,
    eval_fraction: float = DEFAULT_EVAL_FRACTION,
    prepare_scene: Callable[[Scene], None] | None = None,
) -> dict[str, Any]:
    """Convert input files (module docstring) in local worker processes, or as the tasks of an
    existing Ray cluster at ``ray_address`` (inputs and ``out`` must then be on a filesystem every
    node sees); write ``index.json`` and ``summary.json`` in ``out``; return the summary. Each scene
    goes to the eval split with probability ``eval_fraction``, by its scenario id (:func:`scene_split`).

    ``on_shard`` gets each input file's report (:meth:`_Collector.shard_report`) when it is done;
    ``prepare_scene`` runs on every scene written, in the worker that wrote it (see :class:`ShardTask`).

    Raises:
        UserError: before converting anything, for inputs that match no file, an ``out`` that
            cannot be a folder, or an existing ``index.json`` that cannot be read.
        ConvertInterrupted: on SIGINT or SIGTERM, after the workers ended and both files were written.
    """
    if not 0.0 <= eval_fraction <= 1.0:
        raise UserError(f"--eval-fraction must be in [0, 1], got {eval_fraction}")
    files = prepare(inputs, out)
    index = _read_index(out)
    paths = [str(f.resolve()) for f in files]
    collector = _Collector(paths, on_shard)
    claims = tempfile.mkdtemp(prefix=".convert-claims-", dir=out)
    tasks = [
        ShardTask(p, str(out.resolve()), tuple(formats), max_agents, claims, prepare_scene=prepare_scene)
        for p in paths
    ]
    interrupted = False
    try:
        with _interrupts() as stop:
            if ray_address is not None:
                _convert_on_ray(tasks, ray_address, collector.add_report)
            elif workers <= 1 or len(tasks) == 1:
                # In-process: a signal takes effect between records, so that every scene written is
                # one the index lists.
                stop.defer = True

                def add(entry: dict[str, Any]) -> None:
                    if entry["kind"] == "begin":
                        stop.check()
                    collector.add(entry)

                for task in tasks:
                    convert_shard(task, add)
                    collector.done(task.path)
                stop.check()
            else:
                n = min(workers, len(tasks), os.cpu_count() or 1)
                run_in_processes(
                    tasks, n, convert_shard, collector.add, lambda task: collector.done(task.path)
                )
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        shutil.rmtree(claims, ignore_errors=True)
        summary = _finish(collector, index, out, formats, interrupted, eval_fraction)
    return summary


def agent_totals(converted: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals over converted entries (their ``report``, a ``ConversionReport`` as a dict): the
    logged objects ``controlled``, ``replayed``, ``left_out`` (beyond the replay cap) and
    ``history_only`` (not observed from the current step on), ``by_reason`` (why the replayed and
    left-out ones are not controlled; every key of ``convert.REASONS``) and ``reasons`` (what each
    key means)."""
    by_reason = dict.fromkeys(REASONS, 0)
    totals = {"controlled": 0, "replayed": 0, "left_out": 0, "history_only": 0}
    fields = {
        "controlled": "controlled_agents",
        "replayed": "replayed_objects",
        "left_out": "left_out_objects",
        "history_only": "history_only_objects",
    }
    for entry in converted:
        report = entry.get("report", {})
        for key, field in fields.items():
            totals[key] += int(report.get(field, 0))
        for reason, n in report.get("not_controlled", {}).items():
            by_reason[reason] = by_reason.get(reason, 0) + int(n)
    return {**totals, "by_reason": by_reason, "reasons": dict(REASONS)}


def _finish(
    collector: _Collector,
    index: dict[str, Any],
    out: Path,
    formats: Sequence[str],
    interrupted: bool,
    eval_fraction: float = DEFAULT_EVAL_FRACTION,
) -> dict[str, Any]:
    """Merge what was written into ``index`` (every entry split anew with ``eval_fraction``) and
    write ``index.json`` and ``summary.json``."""
    reports = [collector.shard_report(f) for f in collector.entries]
    for rep in reports:
        for c in rep["converted"]:
            index["scenes"][c["scenario_id"]] = {
                "source": rep["file"],
                "record": c["record"],
                "offset": c["offset"],
                "files": c["files"],
            }
    for sid, entry in index["scenes"].items():
        if isinstance(entry, dict):
            entry["split"] = scene_split(sid, eval_fraction)
    index["eval_fraction"] = eval_fraction
    write_json(out / "index.json", index)
    splits = dict.fromkeys(SPLITS, 0)
    for rep in reports:
        for c in rep["converted"]:
            splits[scene_split(c["scenario_id"], eval_fraction)] += 1
    errors = [e for r in reports for e in r["errors"]]
    skipped = [s for r in reports for s in r["skipped"]]
    converted = sum(len(r["converted"]) for r in reports)
    summary = {
        "files": len(reports),
        "scenarios_read": converted + len(skipped) + sum(1 for e in errors if e["scenario_id"] is not None),
        "converted": converted,
        "splits": splits,
        "eval_fraction": eval_fraction,
        "agents": agent_totals([c for r in reports for c in r["converted"]]),
        "scene_warnings": {  # what real data holds, kept and counted (scenes.plausibility.WARNED)
            key: sum(
                c["report"].get("scene_warnings", {}).get(key, 0) for r in reports for c in r["converted"]
            )
            for key, _ in WARNED
        },
        "skipped": skipped,
        "errors": errors,
        "warnings": [w for r in reports for w in r["warnings"]],
        "interrupted": interrupted,
        "formats": list(formats),
        "out": str(out),
    }
    write_json(out / "summary.json", summary)
    return summary
