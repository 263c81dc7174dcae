"""Argument types shared by the command-line modules (``cli``, ``go1_cli``)."""

from __future__ import annotations

import argparse


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1, or an argparse error naming the text."""
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An integer >= 0, or an argparse error naming the text."""
    return _int_at_least(text, 0, "an integer >= 0")


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
