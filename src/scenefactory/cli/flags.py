"""Command-line flags generated from a config dataclass: :func:`add_flags` walks
``dataclasses.fields`` and the type hints of the class and emits one ``add_argument`` per field,
from a table of :class:`Flag` s that holds only what the class cannot say (the help text, the
checked argument type of ``scenefactory.bounds``, a flag name that differs from the field's, a
metavar, the choices). :func:`given_fields` reads back the fields whose flags were given, so a
named recipe can supply the rest (``train go1 --recipe NAME``), and :class:`ListAction` prints a
listing and exits, as ``--help`` does.

What the hint decides: ``bool`` is a switch (``store_true``, or ``store_false`` for a field that
defaults to ``True``); ``X | None`` is ``X`` (absent: the field's default); ``tuple[X, X]`` takes
that many values; ``tuple[X, ...]`` several values, or one per repetition of the flag
(``Flag.repeat``); ``Path`` is a path; ``int`` and ``float`` need a checked type in the table. The
flags default to ``argparse.SUPPRESS``: a field's default stays in the dataclass.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn


@dataclass(frozen=True)
class Flag:
    """What a field's flag needs beyond its type hint and default: ``help``; ``type`` (checked
    numbers: an ``IntRange`` or ``FloatRange``; any parser of one value); ``name`` (default:
    ``--field-name``); ``metavar``; ``choices``; ``repeat`` (a ``tuple[X, ...]`` field: one value
    per repetition of the flag instead of several after one)."""

    help: str | None = None
    type: Callable[[str], Any] | None = None
    name: str | None = None
    metavar: str | tuple[str, ...] | None = None
    choices: tuple[str, ...] | None = None
    repeat: bool = False


def _unwrap_optional(hint: Any) -> Any:
    """``X`` of ``X | None``; ``hint`` otherwise."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"only X | None unions become flags, got {hint}")
        return rest[0]
    return hint


def flag_name(field: str, flag: Flag) -> str:
    """The option string of ``field``."""
    return flag.name or "--" + field.replace("_", "-")


def _argument(field: dataclasses.Field[Any], hint: Any, flag: Flag) -> dict[str, Any]:
    """``add_argument`` keywords for one field."""
    kwargs: dict[str, Any] = {"dest": field.name, "default": argparse.SUPPRESS, "help": flag.help}
    kind = _unwrap_optional(hint)
    if kind is bool:
        kwargs["action"] = "store_false" if field.default is True else "store_true"
        return kwargs
    item = kind
    if typing.get_origin(kind) is tuple:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis and flag.repeat:
            kwargs["action"] = "append"
        elif len(args) == 2 and args[1] is Ellipsis:
            kwargs["nargs"] = "+"
        else:
            if len(set(args)) != 1:
                raise TypeError(f"{field.name}: a fixed tuple flag takes values of one type, got {kind}")
            kwargs["nargs"] = len(args)
        item = args[0]
    if flag.type is not None:
        kwargs["type"] = flag.type
    elif item is Path:
        kwargs["type"] = Path
    elif item is not str:
        raise TypeError(f"{field.name}: {item} needs a checked type (Flag.type), e.g. a FloatRange")
    if flag.metavar is not None:
        kwargs["metavar"] = flag.metavar
    if flag.choices is not None:
        kwargs["choices"] = flag.choices
    return kwargs


def add_flags(
    parser: argparse.ArgumentParser,
    cls: type[Any],
    table: Mapping[str, Flag],
    exclude: Sequence[str] = (),
) -> None:
    """Add a flag for each field of the dataclass ``cls`` in ``table`` (in the table's order).
    Every field must be in ``table`` or ``exclude`` (a field added later gets a flag or is left out
    on purpose); ``TypeError`` otherwise, when the parser is built."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(table) - set(fields)
    missing = set(fields) - set(table) - set(exclude)
    if unknown or missing:
        raise TypeError(
            f"{cls.__name__} flags: not fields {sorted(unknown)}; fields without a flag {sorted(missing)}"
        )
    hints = typing.get_type_hints(cls)
    for name, flag in table.items():
        parser.add_argument(flag_name(name, flag), **_argument(fields[name], hints[name], flag))


def given_fields(args: argparse.Namespace, table: Mapping[str, Flag]) -> dict[str, Any]:
    """The fields of ``table`` whose flags were given, as the dataclass holds them (lists of
    values become tuples)."""
    out: dict[str, Any] = {}
    for name in table:
        if hasattr(args, name):
            value = getattr(args, name)
            out[name] = tuple(value) if isinstance(value, list) else value
    return out


class ListAction(argparse.Action):
    """A flag that prints ``listing()`` and exits with status 0, whatever else is on the command
    line (as ``--help`` does), so ``train go1 --list-recipes`` needs no ``--out``."""

    def __init__(self, option_strings: list[str], dest: str, listing: Callable[[], str], help: str) -> None:
        """``listing`` is called only when the flag is given (it may import what it lists)."""
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)
        self.listing = listing

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> NoReturn:
        """Print the listing and exit."""
        print(self.listing())
        parser.exit()
