"""A registry entry of an experiment: what it is called, what it takes, how it runs, and how its
``results.json`` is read back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scenefactory.experiments.base import ExperimentArgs
from scenefactory.experiments.report import ResultsFile
from scenefactory.experiments.results import ExperimentResults, Reader


@dataclass(frozen=True)
class Experiment:
    """A registry entry: name, one-line summary, the checkpoint kinds it accepts, its runner (writes
    the report folder, returns the results file), the reader of its typed results (the result
    class's ``from_json``), and the experiment-specific flags it takes (``--action-lag-steps``,
    ``--budget``, ``--dynamics-model``)."""

    name: str
    summary: str
    kinds: tuple[str, ...]
    run: Callable[[ExperimentArgs], ResultsFile[Any]]
    read_results: Callable[[Reader], ExperimentResults]
    options: tuple[str, ...] = ()
