"""Files written whole or not at all: a temporary file beside the target, renamed into place."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def replace_atomically(path: Path, write: Callable[[str], object]) -> None:
    """Call ``write(temporary_path)``, then rename that file onto ``path``; a crash in between
    leaves ``path`` as it was and no temporary file behind."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    os.close(handle)
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    replace_atomically(path, lambda temporary: Path(temporary).write_text(text))
