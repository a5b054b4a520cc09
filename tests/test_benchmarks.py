"""Benchmark scripts that must behave on any machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from script_loader import load_script

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU the check runs for real")
def test_cuda_check_skips_with_a_clear_message_without_a_gpu() -> None:
    script = ROOT / "benchmarks" / "cuda_check.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "CUDA is not available" in result.stdout


def test_action_shares_accounts_for_every_command_and_every_rise(tmp_path: Path) -> None:
    action_shares = load_script("benchmarks/action_shares.py")
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


@pytest.mark.parametrize("env_id", ["RLA-TextNav-v0", "RLA-Household-v0", "RLA-GUI-v0", "RLA-Reason-v0"])
def test_vector_phases_time_every_world_the_env_starts(env_id: str) -> None:
    """benchmarks/vector_phases.py counts one timed generation per episode that ended (no world
    is missed or timed twice), every part takes time, and the timers are taken off again."""
    vector_phases = load_script("benchmarks/vector_phases.py")
    vector = gym.make_vec(env_id, num_envs=2, array_state=True).unwrapped
    env_cls, bare = type(vector), type(vector.envs[0])
    row = vector_phases.phases(env_id, 32, seconds=0.2)
    assert row["env_class"] == env_cls.__name__ and row["steps"] > 0
    assert row["generated"] == row["worlds"] > 0
    assert min(row["generation_ms"], row["reading_in_ms"], row["rest_ms"]) > 0
    assert row["ceiling_arrays_only"] > row["ceiling_without_generation"] > row["steps_per_s"]
    timed = [getattr(env_cls, name) for name in vector_phases.READING_IN] + [bare._start_task]
    assert all(method.__name__ != "timed_method" for method in timed)


def test_difficulty_curve_shows_where_gui_v1_asks_for_ok() -> None:
    """benchmarks/difficulty_curve.py: the two GUI versions are one env below d = 0.1 (the same
    tasks, actions and figures); at 0.15 v1's dialog needs OK, one command more, and random
    commands solve fewer tasks."""
    difficulty_curve = load_script("benchmarks/difficulty_curve.py")
    v0, v1 = (difficulty_curve.curve(env_id, (0.05, 0.15), 300) for env_id in ("RLA-GUI-v0", "RLA-GUI-v1"))
    assert v0[0] == v1[0] and v0[0]["episodes"] >= 300
    assert v1[1]["optimal_len"] == pytest.approx(v0[1]["optimal_len"] + 1)
    assert v1[1]["random_success"] < v0[1]["random_success"] / 2  # 0.095 against 0.53 measured


def test_training_throughput_builds_every_configuration_and_trains_the_lean_closed_loop() -> None:
    """Every row of the benchmark builds (LoopSettings validated), and the lean closed loop's row
    trains a rollout with the PRM and the curriculum switched on."""
    throughput = load_script("benchmarks/training_throughput.py")
    trained = 0
    for name, fields in throughput.CONFIGS.items():
        model, settings, learn = throughput.build(dict(fields), 0, 0.25)
        assert settings.difficulty == 0.25, name
        if "closed loop" in name and getattr(settings, "algo", "") == "batched-ppo":
            trained += 1
            learn(1024)
            assert model.num_timesteps == 1024 and model.curriculum_env is not None
            assert model.feedback.rollout_votes.shape == (4, 256, 3)  # the last rollout's votes
    assert trained == 1
    lean_loop = [n for n, f in throughput.CONFIGS.items() if f.get("algo") == "batched-ppo"]
    assert lean_loop and all(throughput.CONFIGS[n]["mode"] == "env" for n in lean_loop)


def test_loop_stack_times_each_layer_of_the_lean_loop() -> None:
    """benchmarks/loop_stack.py builds the lean loop's env-side stack layer by layer and times a
    few steps of each (the votes drawn once per rollout of 4 steps)."""
    loop_stack = load_script("benchmarks/loop_stack.py")
    stack = loop_stack.make(2)
    assert type(stack).__name__ == "CurriculumVectorWrapper"
    assert type(stack.env).__name__ == "FeedbackVectorWrapper"
    assert all(loop_stack.cpu_us_per_step(layers, 8) > 0 for layers in range(3))
