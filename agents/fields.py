"""Settings fields with their command-line help (no torch: the CLI imports it for every command)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any


def described(default: Any, text: str) -> Any:
    """A dataclass field with a default and the help text its command-line flag shows."""
    return dataclasses.field(default=default, metadata={"help": text})


def noted(cls: type, name: str, note: str) -> Any:
    """The dataclass ``cls``'s field ``name`` (its default and help), with ``note`` added to the help:
    a subclass's field that keeps the default but tells the command line more."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return described(field.default, f"{field.metadata['help']} ({note})")


def check_finite(name: str, value: Any, *, positive: bool) -> None:
    """Raise naming ``value`` unless it is a finite number > 0 (``positive``) or >= 0 (a trainer's
    coefficients and limits)."""
    sign = ">" if positive else ">="
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number {sign} 0, got {value!r}")
    if not (value > 0 if positive else value >= 0):
        raise ValueError(f"{name} must be a finite number {sign} 0, got {value!r}")
