"""Generated env pages match the env docstrings, and every env has a page in the nav."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import rla_gym

ROOT = Path(__file__).resolve().parent.parent


def test_env_pages_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_env_pages.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_env_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for env_id in rla_gym.ENV_IDS:
        assert f"{env_id}: envs/" in nav


def test_write_your_own_curriculum_tutorial_runs() -> None:
    import re

    page = (ROOT / "docs" / "curricula" / "custom.md").read_text()
    code, proof = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(code.strip().splitlines()) <= 30
    namespace: dict = {}
    exec(compile(code, "custom.md", "exec"), namespace)
    assert namespace["env"].curriculum.difficulty >= 0.5  # the oracle always succeeds: it climbs
    assert namespace["env"].curriculum.state_dict()["streak"] in (0, 1, 2)
    exec(compile(proof, "custom.md", "exec"), namespace)
    report = namespace["report"]
    assert 0.7 < report["success_mean"] < 0.85  # three up, one down: near 0.79, as the page says
    assert report["skill_gain"] > 0.3 and report["skill_correlation"] > 0.5


def test_policies_page_example_runs() -> None:
    import re

    import torch

    torch.set_num_threads(1)
    page = (ROOT / "docs" / "policies.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    namespace: dict = {}
    exec(compile(code, "policies.md", "exec"), namespace)
    assert namespace["model"].policy.features_extractor.encoder == "lookup-lite"
    assert namespace["model"].num_timesteps >= 2048 and namespace["result"].episodes > 0


def test_fresh_task_pool_page_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    page = (ROOT / "docs" / "curricula" / "task-pool-fresh.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    exec(compile(code, "task-pool-fresh.md", "exec"), {})
    assert capsys.readouterr().out.split("\n")[:2] == ["8", "[0.1, 0.1]"]


def test_every_curriculum_has_a_page() -> None:
    from rla_gym.curricula import CURRICULA

    nav = (ROOT / "mkdocs.yml").read_text()
    for name, cls in CURRICULA.items():
        assert f"{cls.__name__}: curricula/{name}.md" in nav
        assert (ROOT / "docs" / "curricula" / f"{name}.md").exists()


def test_plr_page_example_scores_levels_with_ppos_values() -> None:
    import torch

    torch.set_num_threads(1)
    page = (ROOT / "docs" / "curricula" / "plr.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    namespace: dict = {}
    exec(compile(code, "plr.md", "exec"), namespace)
    plr = namespace["plr"]
    assert plr.episodes > 5 and len(plr.levels) > 1
    assert max(level["score"] for level in plr.levels) > 0


def test_vector_page_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    page = (ROOT / "docs" / "vector.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    exec(compile(code, "vector.md", "exec"), {})
    assert capsys.readouterr().out.startswith("(256, 69) [")


def test_the_lean_closed_loop_example_on_the_loop_page_runs() -> None:
    page = (ROOT / "docs" / "loop.md").read_text()
    (code,) = [
        block for block in re.findall(r"```python\n(.*?)```", page, flags=re.S) if "BatchedPPO" in block
    ]
    namespace: dict = {}
    exec(compile(code, "loop.md", "exec"), namespace)
    assert namespace["model"].num_timesteps == 4096
    assert {"rm/loss", "curriculum/episodes"} <= set(namespace["loop"].history[-1])
