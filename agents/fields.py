"""Settings fields with their command-line help (no torch: the CLI imports it for every command)."""

from __future__ import annotations

import dataclasses
from typing import Any


def described(default: Any, text: str) -> Any:
    """A dataclass field with a default and the help text its command-line flag shows."""
    return dataclasses.field(default=default, metadata={"help": text})


def noted(cls: type, name: str, note: str) -> Any:
    """The dataclass ``cls``'s field ``name`` (its default and help), with ``note`` added to the help:
    a subclass's field that keeps the default but tells the command line more."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return described(field.default, f"{field.metadata['help']} ({note})")
