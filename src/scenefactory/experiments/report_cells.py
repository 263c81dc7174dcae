"""The cells of a report folder's ``results.json``, of either version, for the seed-level
statistics (``scenefactory seed-level DIR``).

Version 2 (:data:`~.results.RESULTS_VERSION`) files hold typed cells, read by
:meth:`~.results.Cell.from_json`. Version 1 files (written before the results were typed, with no
``version`` field; the reports behind benchmarks/results/experiments were such files) keep
``results.cells`` as an object of cells by name, each with ``per_policy``: one flat object of
figures per policy. They are read here for their per-policy figures only; a version 1 cell keeps its
name as its kind (version 1 recorded no fields to name it by, and the name is never taken apart), so
the cells are named on the command line as the file names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scenefactory.experiments.results import (
    SEED_FIGURES,
    Cell,
    PolicyFigures,
    Reader,
    ResultsFieldError,
    cell_labels,
    check_figures,
    check_version,
)
from scenefactory.io import show_value


def _v1_policy(r: Reader) -> PolicyFigures:
    """One version 1 ``per_policy`` entry: its training seed (an integer or null) and its
    :data:`~.results.SEED_FIGURES`, checked (:func:`~.results.check_figures`)."""
    seed = r.data.get("trained_seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ResultsFieldError(
            f"field '{r.at('trained_seed')}': expected an integer seed or null, got {show_value(seed)}"
        )
    check_figures(r)
    checkpoint = r.data.get("checkpoint")
    return PolicyFigures(
        checkpoint=checkpoint if isinstance(checkpoint, str) else "",
        trained_on=None,
        trained_seed=seed,
        trained_iterations=None,
        wall_s=None,
        metrics={k: v for k, v in r.data.items() if k in SEED_FIGURES},
    )


def _v1_cells(results: Reader) -> tuple[Cell, ...]:
    cells = results.raw("cells")
    if not isinstance(cells, Mapping):
        raise ResultsFieldError(
            f"field 'results.cells': expected an object of cells by name, got {show_value(cells)}"
        )
    out = []
    for name, data in cells.items():
        where = f"results.cells.{name}"
        if not isinstance(data, Mapping):
            raise ResultsFieldError(f"field '{where}': expected an object (a cell), got {show_value(data)}")
        per = data.get("per_policy")
        if not isinstance(per, list):
            raise ResultsFieldError(
                f"cell '{name}' has no per_policy figures (field '{where}.per_policy': expected a list, "
                f"one entry per trained policy, got {show_value(per)})"
            )
        policies = tuple(_v1_policy(Reader(p, f"{where}.per_policy[{i}]")) for i, p in enumerate(per))
        out.append(Cell(str(name), "", "", {}, policies))
    return tuple(out)


def read_cells(data: Any) -> tuple[str | None, tuple[Cell, ...]]:
    """``(experiment, cells)`` of a ``results.json`` document of either version (see the module
    docstring), without the rest of the experiment's results; a field that does not read is a
    :class:`~.results.ResultsFieldError` naming it."""
    if not isinstance(data, Mapping):
        raise ResultsFieldError(f"expected a JSON object (an experiment report), got {show_value(data)}")
    doc = Reader(data, "")
    experiment = data.get("experiment") if isinstance(data.get("experiment"), str) else None
    results = doc.obj("results")
    if not results.has("cells"):
        raise ResultsFieldError(
            f"field 'results.cells' is missing: experiment {experiment} evaluates no policies by cell"
        )
    if not doc.has("version"):
        return experiment, _v1_cells(results)
    check_version(doc)
    cells = results.objects("cells", Cell.from_json)
    try:
        cell_labels(cells)
    except ValueError as exc:
        raise ResultsFieldError(f"field 'results.cells': {exc}") from None
    return experiment, cells
