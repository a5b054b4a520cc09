"""The batched held-out evaluation (agents.evaluation) and the protocol's metrics."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import RLA_ENV_IDS

from agents.evaluation import (
    DENSE_LEVELS,
    area_under,
    evaluate_batched,
    frontier_d50,
    normalise,
    oracle_batch_agent,
    policy_batch_agent,
    random_batch_agent,
    run_metrics,
)
from agents.loop import LoopSettings, build_loop
from agents.train import TrainSettings, evaluate_policy
from rla_gym.core import HELDOUT_SEED_START, TASK_SEED_LIMIT
from rla_gym.evaluation import evaluate, heldout_seeds, oracle_agent


@pytest.mark.parametrize("algo", ["ppo", "maskable-ppo"])
def test_greedy_batched_evaluation_equals_one_episode_at_a_time(algo: str) -> None:
    """Same held-out tasks, same greedy policy: the batch (in chunks smaller than the grid, with
    padding) gives exactly the success and lengths of running each episode alone."""
    torch.set_num_threads(1)
    settings = LoopSettings(algo=algo, mode="outcome", n_envs=2, n_steps=64, seed=0, device="cpu")
    model, loop = build_loop(settings)
    model.learn(256, callback=loop)
    levels = (0.0, 0.3, 0.6)
    evaluation = TrainSettings(**vars(settings), eval_episodes=9)
    one_by_one = evaluate_policy(model, evaluation, levels, batched=False)
    batched = evaluate_batched(
        "RLA-TextNav-v0", policy_batch_agent(model, algo == "maskable-ppo", True), levels, tasks=9, chunk=7
    )
    assert evaluate_policy(model, evaluation, levels) == [
        {k: r[k] for k in ("difficulty", "success", "mean_length")} for r in batched
    ]
    assert [r["success"] for r in batched] == [r["success"] for r in one_by_one]
    assert [r["mean_length"] for r in batched] == [r["mean_length"] for r in one_by_one]
    assert len({r["mean_length"] for r in batched}) > 1  # real episodes, not all cut at one budget


@pytest.mark.parametrize("env_id", RLA_ENV_IDS)
def test_the_oracle_solves_every_held_out_task_in_its_optimal_length(env_id: str) -> None:
    levels = (0.0, 0.5, 1.0)
    rows = evaluate_batched(env_id, oracle_batch_agent(), levels, tasks=6)
    env = gym.make(env_id)
    for row, level in zip(rows, levels, strict=True):
        alone = evaluate(env, oracle_agent, level, heldout_seeds(6))
        assert row["success"] == 1.0 and row["mean_length"] == alone.mean_optimal_len
    randoms = evaluate_batched(env_id, random_batch_agent(seed=1), levels, tasks=6)
    assert randoms[-1]["success"] < 1.0  # random commands fail some d = 1 tasks the oracle solves


def test_bad_evaluation_arguments_are_named() -> None:
    agent = random_batch_agent()
    with pytest.raises(ValueError, match="tasks must be an integer >= 1, got 0"):
        evaluate_batched("RLA-TextNav-v0", agent, tasks=0)
    with pytest.raises(ValueError, match="level"):
        evaluate_batched("RLA-TextNav-v0", agent, levels=(0.5, 1.5), tasks=2)
    with pytest.raises(ValueError, match="not an rla-gym environment"):
        evaluate_batched("CartPole-v1", agent, tasks=2)
    with pytest.raises(ValueError, match="count must be >= 0, got -1"):
        heldout_seeds(-1)
    with pytest.raises(TypeError, match="count must be an integer, got 2.5"):
        heldout_seeds(2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="offset must be >= 0, got -3"):
        heldout_seeds(2, offset=-3)
    with pytest.raises(ValueError, match="offset \\+ count must be <="):
        heldout_seeds(2**31)
    assert heldout_seeds(0) == [] and len(set(heldout_seeds(5) + heldout_seeds(5, offset=5))) == 10
    with pytest.raises(ValueError, match="task_seeds must name at least one task, got none"):
        evaluate(gym.make("RLA-TextNav-v0"), oracle_agent, 0.3, heldout_seeds(0))


def test_heldout_seeds_reach_the_last_seed() -> None:
    room = TASK_SEED_LIMIT - HELDOUT_SEED_START
    assert heldout_seeds(1, offset=room - 1) == [TASK_SEED_LIMIT - 1]
    assert heldout_seeds(0, offset=room) == []


def test_the_protocol_metrics() -> None:
    assert DENSE_LEVELS == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    assert frontier_d50([0.0, 0.1, 0.2, 0.3], [1.0, 0.8, 0.4, 0.0]) == pytest.approx(0.175)
    assert frontier_d50([0.0, 0.5, 1.0], [0.9, 0.7, 0.6]) == 1.0  # every level at least 0.5
    assert frontier_d50([0.0, 0.5, 1.0], [0.4, 0.1, 0.0]) == 0.0  # none
    # the last level that reaches 0.5 counts, even past a dip
    assert frontier_d50([0.0, 0.1, 0.2, 0.3], [0.9, 0.3, 0.5, 0.0]) == pytest.approx(0.2)
    assert area_under([0.0, 0.5, 1.0], [1.0, 0.5, 0.0]) == pytest.approx(0.5)
    assert area_under([0, 10, 30], [0.0, 1.0, 1.0]) == pytest.approx((5 + 20) / 30)
    assert normalise(0.6, 0.2, 1.0) == pytest.approx(0.5) and np.isnan(normalise(0.0, 0.0, 0.0))
    metrics = run_metrics([0.0, 0.5, 1.0], [1.0, 0.5, 0.0], curve=[(0, 0.0), (100, 0.5)])
    assert metrics == pytest.approx({"d50": 0.5, "auc_difficulty": 0.5, "auc_learning": 0.25})
    with pytest.raises(ValueError, match="levels must increase strictly"):
        frontier_d50([0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="must be finite"):
        area_under([0.0, 1.0], [0.5, float("nan")])


def test_evaluating_a_stochastic_policy_leaves_the_callers_random_state_alone() -> None:
    """Evaluations during training must not change what the run learns next."""
    settings = LoopSettings(algo="ppo", mode="outcome", n_envs=2, n_steps=64, seed=0, device="cpu")
    model, _ = build_loop(settings)
    torch.manual_seed(5)
    np.random.seed(5)  # noqa: NPY002
    before_torch, before_numpy = torch.get_rng_state(), np.random.get_state()[1].copy()  # noqa: NPY002
    first = evaluate_batched("RLA-TextNav-v0", policy_batch_agent(model, False, False), (0.0, 0.2), tasks=8)
    assert torch.equal(torch.get_rng_state(), before_torch)
    assert np.array_equal(np.random.get_state()[1], before_numpy)  # noqa: NPY002
    # the same caller state gives the same stochastic evaluation
    assert (
        evaluate_batched("RLA-TextNav-v0", policy_batch_agent(model, False, False), (0.0, 0.2), tasks=8)
        == first
    )
    with pytest.raises(ValueError, match="levels must name at least one difficulty"):
        evaluate_batched("RLA-TextNav-v0", random_batch_agent(), levels=(), tasks=2)


@pytest.mark.parametrize("algo", ["ppo", "maskable-ppo"])
def test_the_policy_agent_samples_its_commands_unless_greedy(algo: str) -> None:
    """64 copies of one observation: the greedy agent gives one command, the stochastic one several,
    and a maskable policy only admissible ones either way."""
    torch.set_num_threads(1)
    masked = algo == "maskable-ppo"
    model, _ = build_loop(LoopSettings(algo=algo, mode="outcome", n_envs=2, n_steps=64, seed=0, device="cpu"))
    obs, info = gym.make("RLA-TextNav-v0", difficulty=0.5).reset(seed=0)
    batch = {key: np.repeat(value[None], 64, axis=0) for key, value in obs.items()}
    masks = np.zeros((64, 24), dtype=np.int8)
    masks[:, [2, 5, 9, 17]] = 1
    torch.manual_seed(0)
    greedy = policy_batch_agent(model, masked, True)(batch, {"action_mask": masks})
    sampled = policy_batch_agent(model, masked, False)(batch, {"action_mask": masks})
    assert greedy.shape == sampled.shape == (64,) and len(set(greedy.tolist())) == 1
    assert len(set(sampled.tolist())) > 1
    if masked:
        assert set(greedy.tolist()) | set(sampled.tolist()) <= {2, 5, 9, 17}


@pytest.mark.parametrize("history", [0, 2])
@pytest.mark.parametrize("algo", ["ppo", "maskable-ppo"])
@pytest.mark.parametrize("deterministic", [True, False])
def test_the_loop_agent_passes_greedy_or_sampling_and_the_masks_to_the_policy(
    algo: str, history: int, deterministic: bool
) -> None:
    from agents.evaluation import loop_batch_agent

    torch.set_num_threads(1)
    settings = LoopSettings(
        algo=algo, mode="outcome", history=history, n_envs=2, n_steps=8, seed=0, device="cpu"
    )
    model, _ = build_loop(settings)
    calls: list[dict] = []
    predict = model.predict

    def recording(obs, **kwargs):
        calls.append({**kwargs, "width": obs["tokens"].shape[1]})
        return predict(obs, **kwargs)

    model.predict = recording  # type: ignore[method-assign]
    rows = evaluate_batched("RLA-TextNav-v0", loop_batch_agent(model, settings, deterministic), (0.2,), 2)
    assert rows[0]["episodes"] == 2 and calls
    for call in calls:
        assert call["deterministic"] is deterministic
        assert ("action_masks" in call) == (algo == "maskable-ppo")
        assert call["width"] == (history * 69 + history if history else 69)  # fed its history
