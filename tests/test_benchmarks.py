"""Benchmark scripts that must behave on any machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU the check runs for real")
def test_cuda_check_skips_with_a_clear_message_without_a_gpu() -> None:
    script = ROOT / "benchmarks" / "cuda_check.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "CUDA is not available" in result.stdout


def test_action_shares_accounts_for_every_command_and_every_rise(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("action_shares", ROOT / "benchmarks/action_shares.py")
    assert spec is not None and spec.loader is not None
    action_shares = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(action_shares)
    config = tmp_path / "tiny.toml"
    config.write_text(
        'envs = ["RLA-TextNav-v0"]\nmodes = ["oracle"]\nstrategies = ["fixed"]\nseeds = 1\nsteps = 2000\n'
        'difficulty = 0.25\npreset = "fast"\nalgo = "maskable-grpo"\n'
        "groups = 4\ngroup_size = 4\nhistory = 1\n"
    )
    out = tmp_path / "shares.json"
    args = ["--config", str(config), "--env", "RLA-TextNav-v0", "--steps", "1", "--every", "1"]
    action_shares.main([*args, "--level", "0.5", "--out", str(out)])
    result = json.loads(out.read_text())
    before, point = result["curve"]
    assert before["step"] == 0 and point["step"] > 0
    for measured in (result["random"], before, point):
        assert sum(measured["shares"].values()) == pytest.approx(1.0)
        progress = measured["progress_shares"]
        assert set(progress) <= {"-1", "+0", "+1"} and sum(progress.values()) == pytest.approx(1.0)
        assert progress["+1"] > 0  # random and early policies still take some optimal commands at d = 0.5
        rises = measured["rise_counts"]
        assert all(int(size) >= 1 for size in rises)  # a command with progress -1 raised the distance
        # the -1 share and the counted rises describe the same commands
        assert sum(rises.values()) == round(progress.get("-1", 0.0) * measured["effects_counted"])
