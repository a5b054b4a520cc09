"""README examples run, and the quick start is what CI runs."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_python_examples_run(capsys) -> None:
    blocks = _python_blocks()
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    assert "success:" in capsys.readouterr().out
    assert namespace["model"].num_timesteps >= 2000


def test_quickstart_has_exactly_two_commands_and_ci_runs_them() -> None:
    block = re.search(r"<!-- quickstart -->\n```bash\n(.*?)```", README.read_text(), flags=re.S)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2 and "rla demo" in commands[0] and "pytest" in commands[1]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "quickstart" in ci  # .ci/run extracts and runs this very block
