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
