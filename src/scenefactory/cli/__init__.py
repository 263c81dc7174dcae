"""The command line: ``scenefactory COMMAND ...`` (``main``), one module per group of commands."""

from __future__ import annotations

from scenefactory.cli.main import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
