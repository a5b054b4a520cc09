"""The framework-free text episode for language-model agents: parsing, episodes, no torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import rla_gym
from rla_gym.llm import TextEpisode, parse_reply
from rla_gym.stats import group_advantages

COMMANDS = ["go north", "go south", "take key", "look"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("\\boxed{2}", 1),  # the second admissible command as listed: go south
        ("I think \\boxed{1} is best, no wait: \\boxed{3}", 3),  # the last box counts
        ("\\boxed{go south}", 1),
        ('act("take key")', None),  # not admissible here
        ("act(command='go north')", 0),
        ('{"name": "act", "arguments": {"command": "look"}}', 3),
        ("First go north, then I would rather go south.", 1),  # the last command named
        ("\\boxed{9}", None),
        ("\\boxed{}", None),
        ("dance", None),
        ("", None),
    ],
)
def test_replies_name_their_command_in_any_of_the_three_forms(reply: str, expected: int | None) -> None:
    assert parse_reply(reply, COMMANDS, admissible=[0, 1, 3]) == expected


def test_a_reply_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="reply must be a string, got 3"):
        parse_reply(3, COMMANDS, [0])  # type: ignore[arg-type]


@pytest.mark.parametrize("env_id", rla_gym.ENV_IDS)
def test_the_oracles_commands_by_name_solve_every_family(env_id: str) -> None:
    episode = TextEpisode(env_id, difficulty=0.3, seed=11)
    prompt = first_prompt = episode.reset()
    assert "Commands:\n1. " in prompt
    done, reward, info = False, 0.0, episode.info
    while not done:
        command = episode.commands[int(np.flatnonzero(info["oracle_mask"])[0])]
        prompt, reward, terminated, truncated, info = episode.step(f"I will {command}.")
        done = terminated or truncated
        assert info["reply_valid"] and info["command"] == command
    assert terminated and reward == 1.0 and info["is_success"]
    assert len(episode.steps) == info["optimal_len"]  # the oracle takes the optimal path
    first = episode.steps[0]
    assert first.prompt == first_prompt and first.valid and first.observation == episode.steps[1].prompt
    with pytest.raises(RuntimeError, match="call reset"):
        episode.step("look")


def test_an_unusable_reply_is_a_flagged_no_op_never_a_crash() -> None:
    episode = TextEpisode("RLA-Reason-v0", difficulty=0.2, seed=5)
    before = episode.reset()
    prompt, reward, terminated, truncated, info = episode.step("I refuse to answer \\boxed{}")
    assert not info["reply_valid"] and info["command"] is None and info["progress"] == 0
    assert prompt.startswith("Your reply named no admissible command") and reward == 0.0
    assert before.split("\n", 1)[0] in prompt  # the same state, described again
    assert not episode.steps[0].valid and episode.steps[0].action == episode.base.noop_action


def test_seedless_episodes_draw_a_fresh_task_and_task_episodes_replay_theirs() -> None:
    fresh = TextEpisode("RLA-TextNav-v0", difficulty=0.5)
    assert fresh.reset() != fresh.reset() or fresh.reset() != fresh.reset()
    task = rla_gym.Task("RLA-Household-v0", 0.4, 9)
    assert TextEpisode(task=task).reset() == TextEpisode(task=task).reset()


def test_group_advantages_need_no_torch() -> None:
    rewards = [np.array([1.0, 1.0]), np.array([-1.0, -1.0, -1.0])]
    np.testing.assert_allclose(group_advantages(rewards)[0], [1.0, 1.0])
    np.testing.assert_allclose(group_advantages(rewards)[1], [-1.0, -1.0, -1.0])  # singleton index: raw R
    code = "import sys, rla_gym.llm, rla_gym.stats; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_llm_page_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "llm.md").read_text()
    (code,) = [
        block for block in re.findall(r"```python\n(.*?)```", page, flags=re.S) if "Trainer" not in block
    ]
    exec(compile(code, "llm.md", "exec"), {})
    success, steps = capsys.readouterr().out.split()
    assert success == "True" and int(steps) > 0
