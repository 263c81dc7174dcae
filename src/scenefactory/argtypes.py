"""Argument types shared by the command-line modules (``cli``, ``go1_cli``)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer >= 1, or an argparse error naming the text."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None


def probability(text: str) -> float:
    """A number in [0, 1), or an argparse error naming the value."""
    value = _float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1), got {value}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0, or an argparse error naming the value."""
    value = _float(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {value}")
    return value
