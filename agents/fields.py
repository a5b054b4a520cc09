"""Settings fields with their command-line help (no torch: the CLI imports it for every command)."""

from __future__ import annotations

import dataclasses
from typing import Any


def described(default: Any, text: str) -> Any:
    """A dataclass field with a default and the help text its command-line flag shows."""
    return dataclasses.field(default=default, metadata={"help": text})
