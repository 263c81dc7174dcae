"""Typed experiment results and their JSON form.

Every experiment returns frozen dataclasses, not dictionaries keyed by composed names: a
:class:`Cell` is the policies of one kind evaluated on one tier under one condition (their pooled
metrics and each policy's own figures); the per-experiment result classes (``TransferResults``,
``GroundingResults``, ...) hold lists of cells and the experiment's other figures. Each class has
an explicit JSON form: ``to_json()`` gives plain data (``write_json`` turns NaN into null) and
the class method ``from_json(reader)`` reads it back from a :class:`Reader`, checking every field
it reads; a missing or mistyped field is a :class:`ResultsFieldError` that names it
(``results.cells[2].policies[0].trained_seed``) and the readers of files add the file
(:func:`read_json_file`). No key of the JSON form is a composed name that is parsed back: cells
are lists of objects with their fields, and where objects are keyed (a metric, a method, an
engine's display name) the key is a plain name.

``results.json`` carries :data:`RESULTS_VERSION`; a file of another version is refused with a
clear error rather than half-read (the seed-level statistics alone also read version 1's cells).
Inside a cell, ``metrics`` objects stay in the library's ``metrics.json`` form (figure name →
value, ``<name>_ci95`` → [low, high]): the figures the seed-level statistics read
(:data:`SEED_FIGURES`) are checked when a file is read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from scenefactory.errors import UserError
from scenefactory.io import show_value

RESULTS_VERSION = 2
"""Version of ``results.json``: 2 holds typed cells (lists of objects with their fields); 1 (files
without a ``version``) keyed cells by composed names such as ``kinematic->mujoco`` (only the
seed-level statistics read those: :mod:`~scenefactory.experiments.report_cells`)."""

SEED_FIGURES = ("goal_reach_rate", "collision_rate", "offroad_rate", "mean_peak_drac_mps2", "high_drac_rate")
"""The per-policy figures the seed-level statistics summarise (where a cell has them)."""

Metrics = Mapping[str, Any]
"""A ``metrics.json`` object: figure name → value, ``<name>_ci95`` → [low, high], counts."""

T = TypeVar("T")


class ResultsFieldError(UserError):
    """A results document that does not hold what its reader expects; the message names the field."""


# ------------------------------------------------------------------------------------ reading


def _mistyped(where: str, expected: str, value: Any) -> ResultsFieldError:
    return ResultsFieldError(f"field '{where}': expected {expected}, got {show_value(value)}")


def _integer(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _mistyped(where, "an integer", v)
    return v


def _number(v: Any, where: str) -> float:
    if v is None:
        return math.nan
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _mistyped(where, "a number or null", v)
    return float(v)


class Reader:
    """A JSON object being read, with its place in the document (``results.cells[2]``) for errors.

    Every accessor checks the type of the field it reads and raises :class:`ResultsFieldError`
    naming the field and what was expected. Numbers read as ``float`` take ``null`` as NaN (strict
    JSON has no NaN; ``write_json`` writes it as null)."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            raise ResultsFieldError(f"field '{where}': expected an object, got {show_value(data)}")
        self.data: Mapping[str, Any] = data
        self.where = where

    def at(self, name: str) -> str:
        """The path of field ``name``."""
        return f"{self.where}.{name}" if self.where else name

    def has(self, name: str) -> bool:
        """Whether the object has field ``name`` (present, possibly null)."""
        return name in self.data

    def raw(self, name: str) -> Any:
        """Field ``name`` as it is; :class:`ResultsFieldError` when it is missing."""
        if name not in self.data:
            raise ResultsFieldError(f"field '{self.at(name)}' is missing")
        return self.data[name]

    def _fail(self, name: str, expected: str) -> ResultsFieldError:
        return _mistyped(self.at(name), expected, self.raw(name))

    def text(self, name: str) -> str:
        """A string field."""
        v = self.raw(name)
        if not isinstance(v, str):
            raise self._fail(name, "a string")
        return v

    def opt_text(self, name: str) -> str | None:
        """A string field that may be null or absent."""
        return None if self.data.get(name) is None else self.text(name)

    def integer(self, name: str) -> int:
        """An integer field (not a boolean)."""
        return _integer(self.raw(name), self.at(name))

    def opt_integer(self, name: str) -> int | None:
        """An integer field that may be null or absent."""
        return None if self.data.get(name) is None else self.integer(name)

    def number(self, name: str) -> float:
        """A number field; null reads as NaN."""
        return _number(self.raw(name), self.at(name))

    def opt_number(self, name: str) -> float | None:
        """A number field that may be null or absent (``None``)."""
        return None if self.data.get(name) is None else self.number(name)

    def flag(self, name: str) -> bool:
        """A boolean field."""
        v = self.raw(name)
        if not isinstance(v, bool):
            raise self._fail(name, "true or false")
        return v

    def interval(self, name: str) -> tuple[float, float]:
        """A ``[low, high]`` pair of numbers (null ends read as NaN)."""
        v = self.raw(name)
        if not isinstance(v, list) or len(v) != 2:
            raise self._fail(name, "a [low, high] pair")
        where = self.at(name)
        return _number(v[0], f"{where}[0]"), _number(v[1], f"{where}[1]")

    def array(self, name: str) -> list[Any]:
        """A list field (its items unchecked)."""
        v = self.raw(name)
        if not isinstance(v, list):
            raise self._fail(name, "a list")
        return v

    def texts(self, name: str) -> tuple[str, ...]:
        """A list of strings."""
        items = self.array(name)
        for i, v in enumerate(items):
            if not isinstance(v, str):
                raise _mistyped(f"{self.at(name)}[{i}]", "a string", v)
        return tuple(items)

    def numbers(self, name: str) -> tuple[float, ...]:
        """A list of numbers (nulls as NaN)."""
        return tuple(_number(v, f"{self.at(name)}[{i}]") for i, v in enumerate(self.array(name)))

    def integers(self, name: str) -> tuple[int, ...]:
        """A list of integers."""
        return tuple(_integer(v, f"{self.at(name)}[{i}]") for i, v in enumerate(self.array(name)))

    def obj(self, name: str) -> Reader:
        """An object field, as a reader."""
        v = self.raw(name)
        if not isinstance(v, Mapping):
            raise self._fail(name, "an object")
        return Reader(v, self.at(name))

    def document(self, name: str) -> dict[str, Any]:
        """An object field kept as plain data (another module's document: a dataset's meta, a fit's
        config)."""
        return dict(self.obj(name).data)

    def objects(self, name: str, read: Callable[[Reader], T]) -> tuple[T, ...]:
        """A list of objects, each read by ``read``."""
        return tuple(read(Reader(v, f"{self.at(name)}[{i}]")) for i, v in enumerate(self.array(name)))

    def by_name(self, name: str, read: Callable[[Reader], T]) -> dict[str, T]:
        """An object whose fields are names (a metric, a method, an engine) of objects read by ``read``."""
        r = self.obj(name)
        return {k: read(Reader(v, r.at(k))) for k, v in r.data.items()}


def read_json_file(path: Path, read: Callable[[Any], T]) -> T:
    """``read(data)`` of the JSON file at ``path``; a missing, unreadable or malformed file, or a
    field ``read`` refuses, is a ``UserError`` naming the file (and the field)."""
    if not path.is_file():
        raise UserError(f"{path}: not found (expected an experiment's report folder)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return read(data)
    except ResultsFieldError as exc:
        raise UserError(f"{path}: {exc}") from None


def check_version(doc: Reader) -> None:
    """Refuse a ``results.json`` of another :data:`RESULTS_VERSION` (or of none: version 1)."""
    if not doc.has("version"):
        raise ResultsFieldError(
            f"field 'version' is missing: a results file from before version {RESULTS_VERSION} (cells "
            "keyed by name; 'seed-level' still reads it) or not an experiment report; rerun the "
            "experiment to rewrite it"
        )
    version = doc.integer("version")
    if version != RESULTS_VERSION:
        raise ResultsFieldError(
            f"field 'version': this scenefactory reads results version {RESULTS_VERSION}, the file has "
            f"version {version}"
        )


# -------------------------------------------------------------------------------- cells


def check_figures(m: Reader) -> None:
    """Check the :data:`SEED_FIGURES` of the object ``m`` has: each a number or null, a rate in [0, 1]."""
    for figure in SEED_FIGURES:
        if figure not in m.data:
            continue
        v = m.opt_number(figure)
        if v is not None and figure.endswith("_rate") and math.isfinite(v) and not 0.0 <= v <= 1.0:
            raise ResultsFieldError(f"field '{m.at(figure)}': expected a rate in [0, 1], got {show_value(v)}")


def _metrics(r: Reader, name: str) -> dict[str, Any]:
    """A ``metrics.json`` object, its :data:`SEED_FIGURES` checked (:func:`check_figures`)."""
    m = r.obj(name)
    check_figures(m)
    return dict(m.data)


@dataclass(frozen=True)
class PolicyFigures:
    """One policy's evaluation in a cell: its checkpoint, what the checkpoint says of its training
    (tier, seed, iterations; ``None`` where it does not say) and its own ``metrics`` over its
    agent-episodes; ``wall_s`` the evaluation's wall time."""

    checkpoint: str
    trained_on: str | None
    trained_seed: int | None
    trained_iterations: int | None
    wall_s: float | None
    metrics: Metrics

    def to_json(self) -> dict[str, Any]:
        """Plain data (see the module docstring)."""
        return {
            "checkpoint": self.checkpoint,
            "trained_on": self.trained_on,
            "trained_seed": self.trained_seed,
            "trained_iterations": self.trained_iterations,
            "wall_s": self.wall_s,
            "metrics": dict(self.metrics),
        }

    @classmethod
    def from_json(cls, r: Reader) -> PolicyFigures:
        """Inverse of :meth:`to_json`."""
        seed = r.data.get("trained_seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ResultsFieldError(
                f"field '{r.at('trained_seed')}': expected an integer seed or null, got {show_value(seed)}"
            )
        return cls(
            checkpoint=r.text("checkpoint"),
            trained_on=r.opt_text("trained_on"),
            trained_seed=seed,
            trained_iterations=r.opt_integer("trained_iterations"),
            wall_s=r.opt_number("wall_s"),
            metrics=_metrics(r, "metrics"),
        )


@dataclass(frozen=True)
class Cell:
    """The policies of one ``kind`` (a training tier, a grounding method, an observation variant)
    evaluated on ``eval_tier`` under ``condition`` (a road, a mid-episode change, an actuator lag;
    ``""`` where the experiment has one condition): the pooled ``metrics`` of all their
    agent-episodes and each policy's own figures (``policies``, one per training seed or given
    checkpoint); ``train_wall_s`` the time spent training the kind's policies in this invocation
    (``None`` where the experiment does not measure it)."""

    kind: str
    eval_tier: str
    condition: str
    metrics: Metrics
    policies: tuple[PolicyFigures, ...]
    train_wall_s: float | None = None

    @property
    def checkpoints(self) -> list[str]:
        """The checkpoints of the cell's policies, in order."""
        return [p.checkpoint for p in self.policies]

    def to_json(self) -> dict[str, Any]:
        """Plain data (see the module docstring)."""
        return {
            "kind": self.kind,
            "eval_tier": self.eval_tier,
            "condition": self.condition,
            "train_wall_s": self.train_wall_s,
            "metrics": dict(self.metrics),
            "policies": [p.to_json() for p in self.policies],
        }

    @classmethod
    def from_json(cls, r: Reader) -> Cell:
        """Inverse of :meth:`to_json`."""
        return cls(
            kind=r.text("kind"),
            eval_tier=r.text("eval_tier"),
            condition=r.text("condition"),
            metrics=_metrics(r, "metrics"),
            policies=r.objects("policies", PolicyFigures.from_json),
            train_wall_s=r.opt_number("train_wall_s"),
        )


def cell_labels(cells: Sequence[Cell]) -> list[str]:
    """Each cell's name in the tables and on the ``seed-level --compare`` command line: its kind,
    then ``->tier`` where the cells are evaluated on more than one tier, then ``|condition`` where
    they differ in condition (``kinematic->mujoco``, ``aware|wet``, ``history``). Names are made
    from the fields, never read back into them; two cells with the same fields are an error."""
    tiers, conditions = {c.eval_tier for c in cells}, {c.condition for c in cells}
    labels = [
        c.kind
        + (f"->{c.eval_tier}" if len(tiers) > 1 else "")
        + (f"|{c.condition}" if len(conditions) > 1 else "")
        for c in cells
    ]
    if len(set(labels)) != len(labels):
        raise ValueError(f"cells with the same kind, tier and condition: {labels}")
    return labels


def find_cell(
    cells: Sequence[Cell], kind: str, eval_tier: str | None = None, condition: str | None = None
) -> Cell:
    """The one cell of ``kind`` (on ``eval_tier``, under ``condition`` where given); ``KeyError``
    when there is none or more than one."""
    found = [
        c
        for c in cells
        if c.kind == kind
        and (eval_tier is None or c.eval_tier == eval_tier)
        and (condition is None or c.condition == condition)
    ]
    if len(found) != 1:
        raise KeyError(f"{len(found)} cells of kind {kind!r}, tier {eval_tier!r}, condition {condition!r}")
    return found[0]


# ------------------------------------------------------------------------ differences, gaps


@dataclass(frozen=True)
class Difference:
    """A − B with its 95 % interval (NaN where undefined); ``draws_used`` the bootstrap draws
    behind a resampled interval (``None`` for a closed-form one)."""

    diff: float
    ci95: tuple[float, float]
    draws_used: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain data (see the module docstring)."""
        out: dict[str, Any] = {"diff": self.diff, "ci95": list(self.ci95)}
        if self.draws_used is not None:
            out["draws_used"] = self.draws_used
        return out

    @classmethod
    def from_json(cls, r: Reader) -> Difference:
        """Inverse of :meth:`to_json`."""
        return cls(r.number("diff"), r.interval("ci95"), r.opt_integer("draws_used"))


@dataclass(frozen=True)
class Contrast:
    """Differences per metric for one ``subject`` (a training tier under a road change, a road for
    aware − unaware, a policy kind against a reference): metric name → :class:`Difference`."""

    subject: str
    differences: Mapping[str, Difference]

    def to_json(self) -> dict[str, Any]:
        """Plain data (see the module docstring)."""
        return {"subject": self.subject, "differences": {k: d.to_json() for k, d in self.differences.items()}}

    @classmethod
    def from_json(cls, r: Reader) -> Contrast:
        """Inverse of :meth:`to_json`."""
        return cls(r.text("subject"), r.by_name("differences", Difference.from_json))


def find_contrast(contrasts: Sequence[Contrast], subject: str) -> Contrast:
    """The contrast of ``subject``; ``KeyError`` when there is none."""
    for c in contrasts:
        if c.subject == subject:
            return c
    raise KeyError(f"no contrast for {subject!r}")


# ------------------------------------------------------------------------- experiment results


class ExperimentResults(Protocol):
    """What every experiment's result class offers: its cells (for the seed-level statistics;
    empty where no policy is evaluated) and its JSON form."""

    @property
    def cells(self) -> tuple[Cell, ...]:
        """The cells the seed-level statistics summarise."""
        ...

    def to_json(self) -> dict[str, Any]:
        """Plain data, read back by the class's ``from_json(Reader)``."""
        ...
