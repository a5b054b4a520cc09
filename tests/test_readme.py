"""README examples run, and the quick start is what CI runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_python_example_runs_on_its_own(index: int) -> None:
    """Each block in a fresh interpreter, as a reader would paste it (registration is per process)."""
    block = _python_blocks()[index] + "\nprint('BLOCK OK')\n"
    result = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "BLOCK OK" in result.stdout


def test_readme_has_the_promised_examples() -> None:
    blocks = _python_blocks()
    assert len(blocks) >= 2
    assert 'gym.make("RLA-TextNav-v0", difficulty=0.7)' in blocks[0] and 'info["action_mask"]' in blocks[0]


def test_quickstart_has_exactly_two_commands_and_ci_runs_them() -> None:
    block = re.search(r"<!-- quickstart -->\n```bash\n(.*?)```", README.read_text(), flags=re.S)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2 and "rla train" in commands[0] and "pytest" in commands[1]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "/<!-- quickstart -->/" in ci  # .ci/run's awk extracts and runs this very block


@pytest.mark.slow
def test_readme_bench_command_runs_on_a_tiny_budget(tmp_path: Path) -> None:
    """The README's `rla bench` line, with later flags (argparse: the last one wins) shrinking it."""
    (line,) = [x for x in README.read_text().splitlines() if x.startswith("rla bench ")]
    tiny = ["--seeds", "1", "--steps", "512", "--eval-every", "512", "--eval-episodes", "2",
            "--n-envs", "2", "--n-steps", "128", "--out", str(tmp_path / "bench")]  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "agents.cli", *line.split()[1:], *tiny],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    # the runs compare the curricula alone (--preset auto: MaskablePPO, lambda 0), and it says so
    assert "## Curriculum strategies\n" in result.stdout
    assert "(0: the curriculum alone): RLA-Reason-v0 0; RLA-TextNav-v0 0." in result.stdout
    assert len(list((tmp_path / "bench" / "runs").glob("*.json"))) == 2 * 3


def test_readme_links_point_at_files_that_exist() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    assert links, "the README links its docs pages"
    missing = [link for link in links if "://" not in link and not (README.parent / link).exists()]
    assert not missing, missing
