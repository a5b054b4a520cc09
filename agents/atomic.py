"""Files written whole or not at all: a temporary file beside the target, renamed into place;
and JSON files read back with a message that names the file when one is not valid JSON."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def replace_atomically(path: Path, write: Callable[[str], object]) -> None:
    """Call ``write(temporary_path)``, then rename that file onto ``path``; a crash in between
    leaves ``path`` as it was and no temporary file behind.

    A write that fails (a full disk: ``OSError``, or torch's ``RuntimeError`` from its stream
    writer) raises ``OSError`` naming ``path`` and saying that its previous content is intact.
    """
    existed = path.exists()
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    os.close(handle)
    try:
        write(temporary)
        os.replace(temporary, path)
    except (OSError, RuntimeError) as error:
        kept = f"the previous {path.name} is intact" if existed else f"no {path.name} was written"
        raise OSError(f"could not save {path} ({error}); {kept}") from error
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    replace_atomically(path, lambda temporary: Path(temporary).write_text(text))


def read_json(path: Path, remedy: str) -> Any:
    """The JSON in ``path``; a file that is not valid JSON raises ``ValueError`` naming it, why,
    and ``remedy`` (what to do about it)."""
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON ({error}); {remedy}") from error
