"""The integration page's examples run: TorchRL's masked PPO on the batched env with a curriculum."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_torchrl_masked_ppo_example_runs_and_the_curriculum_sees_every_episode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("torchrl")
    import torch

    torch.set_num_threads(1)
    page = (ROOT / "docs" / "integrations.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, flags=re.S)[0]
    namespace: dict = {}
    exec(compile(code, "integrations.md", "exec"), namespace)
    curriculum = namespace["curriculum"]
    episodes, difficulty = capsys.readouterr().out.split()[-2:]
    assert int(episodes) == curriculum.episodes > 300  # every finished episode reached it
    assert 0.0 <= float(difficulty) <= 0.5 and curriculum.metrics()["moves"] > 0


def test_torchrl_reads_the_regular_info_of_single_envs() -> None:
    pytest.importorskip("torchrl")
    from torchrl.envs import GymEnv
    from torchrl.envs.libs.gym import default_info_dict_reader

    import rla_gym  # noqa: F401

    keys = ["task_key", "oracle_mask", "distance", "outcome", "is_success"]
    env = GymEnv("RLA-Household-v0", difficulty=0.2).set_info_dict_reader(default_info_dict_reader(keys))
    rollout = env.rollout(20)
    for key in ("task_key", "oracle_mask", "distance", "outcome", "is_success"):
        assert ("next", key) in rollout.keys(True)
    assert rollout["next", "oracle_mask"].shape[-1] == rollout["action_mask"].shape[-1]


@pytest.mark.slow
def test_one_curriculum_served_by_a_ray_actor_sees_every_runners_episodes_exactly_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ray = pytest.importorskip("ray")
    page = (ROOT / "docs" / "integrations.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, flags=re.S)[1]
    namespace: dict = {}
    try:
        exec(compile(code, "integrations.md", "exec"), namespace)
        finished, seen, difficulty = capsys.readouterr().out.split()[-3:]
        assert int(finished) == int(seen) == 160  # the one curriculum got every runner's episodes
        assert float(difficulty) > 0.3  # the oracle always succeeds: the shared curriculum climbed
        issued, reported = ray.get(namespace["server"].log.remote())
        assert sorted(issued) == [0, 1, 2, 3] and len(reported) == 160
        assert len(set(reported)) == len(reported)  # fresh seeds: each episode reported once
        for keys in issued.values():
            assert len(keys) == 41  # 40 episodes run, and the task queued by the last reset
            assert set(keys[:40]) <= set(reported)
    finally:
        ray.shutdown()


def test_cleanrl_style_script_runs_and_the_curriculum_sees_every_episode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import torch

    torch.set_num_threads(1)
    page = (ROOT / "docs" / "integrations.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", page, flags=re.S) if "class Agent" in b)
    namespace: dict = {}
    exec(compile(code, "integrations.md", "exec"), namespace)
    finished, told, difficulty = capsys.readouterr().out.split()[-3:]
    assert int(finished) == int(told) == namespace["curriculum"].episodes > 300  # each episode reported once
    assert 0.0 < float(difficulty) <= 0.5 and namespace["curriculum"].metrics()["moves"] > 0
