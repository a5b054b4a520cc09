"""The closed loop on the lean batched path (agents.batched_loop, agents.batched_ppo's modes):
trajectories and labels exactly those of single envs, process rewards per scale, the PRM's
predicted outcomes reaching the curriculum, the curriculum's sample mask, ``rla train`` and
``rla bench`` in the closed loop's modes (checkpoint, resume, refusals), and learning."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from agents.batched_loop import BATCHED_MODES, BatchedLoopCallback, FeedbackVectorWrapper
from agents.batched_ppo import BatchedPPO
from agents.cli import main
from agents.loop import LoopSettings, apply_preset, build_loop, validate_settings
from agents.loop_runtime import MODE_FLAGS
from agents.reward_model import PRMTrainer, ProcessRewardModel
from agents.train import _restore, load_checkpoint
from rla_gym.core import Task
from rla_gym.curricula import TaskPoolCurriculum, UniformCurriculum
from rla_gym.curricula.base import EpisodeResult
from rla_gym.evaluation import evaluate, heldout_seeds
from rla_gym.wrappers.vector import CurriculumVectorWrapper
from tests.vector_checks import oracle_led_actions


def _batched(env_id: str, n: int, difficulty: float = 0.25) -> gym.vector.VectorEnv:
    return gym.make_vec(
        env_id, num_envs=n, vectorization_mode="vector_entry_point", difficulty=difficulty,
        autoreset_mode=AutoresetMode.SAME_STEP,
    )  # fmt: skip


def _single_trajectories(env_id: str, n: int, seed: int, actions: list[np.ndarray]) -> list[tuple]:
    """The episodes of n single envs seeded seed + i, stepped with ``actions``, in the order they end."""
    envs = [gym.make(env_id, difficulty=0.25) for _ in range(n)]
    running, ended = [], []
    for i, env in enumerate(envs):
        obs, info = env.reset(seed=seed + i)
        running.append({"obs": [obs["tokens"]], "actions": [], "labels": [], "info": info})
    for step in actions:
        for i, (env, action) in enumerate(zip(envs, step, strict=True)):
            obs, _, terminated, truncated, info = env.step(int(action))
            episode = running[i]
            episode["actions"].append(int(action))
            episode["labels"].append(1 if info["progress"] == 1 else -1)
            episode["obs"].append(obs["tokens"])
            if terminated or truncated:
                start = episode["info"]
                ended.append((
                    i, np.stack(episode["obs"][:-1]), np.array(episode["actions"]),
                    np.stack(episode["obs"][1:]), int(info["outcome"]), str(start["task_key"]),
                    np.array(episode["labels"]), float(start["difficulty"]),
                ))  # fmt: skip
                obs, info = env.reset()
                running[i] = {"obs": [obs["tokens"]], "actions": [], "labels": [], "info": info}
    return ended


def test_feedback_trajectories_are_those_of_single_envs(env_id: str) -> None:
    """Every finished episode of the wrapper, in the order episodes end (sub-envs in index order
    within a step), is the single env's: observations, actions, next observations, outcome, task
    key, exact labels, difficulty."""
    n, seed, steps = 6, 11, 60
    envs = FeedbackVectorWrapper(_batched(env_id, n), None, mode="oracle")
    obs, info = envs.reset(seed=seed)
    rng, taken = np.random.default_rng(0), []
    for _ in range(steps):
        actions = oracle_led_actions(info["oracle_mask"], obs["action_mask"], rng)
        taken.append(actions)
        obs, _, _, _, info = envs.step(actions)
    ours = envs.drain()
    theirs = _single_trajectories(env_id, n, seed, taken)
    assert len(ours) == len(theirs) > n
    for trajectory, (_, obs_, actions_, next_, outcome, task, labels, level) in zip(
        ours, theirs, strict=True
    ):
        assert np.array_equal(trajectory.obs, obs_) and np.array_equal(trajectory.next_obs, next_)
        assert np.array_equal(trajectory.actions, actions_) and np.array_equal(trajectory.labels, labels)
        assert (trajectory.outcome, trajectory.task_id, trajectory.difficulty) == (outcome, task, level)
    assert envs.drain() == []


@pytest.mark.parametrize("scale", ["step", "episode", "advantage"])
def test_oracle_process_rewards_are_the_weighted_exact_labels(scale: str) -> None:
    n, lam = 8, 0.5
    envs = FeedbackVectorWrapper(
        _batched("RLA-TextNav-v0", n), None, mode="oracle", lam=lam, process_scale=scale
    )
    obs, info = envs.reset(seed=3)
    rng, labels, weights = np.random.default_rng(1), [], []
    budget = info["step_budget"].astype(float)
    for _ in range(40):
        step_weights = {"step": np.full(n, lam), "episode": lam / budget, "advantage": np.ones(n)}[scale]
        obs, _, terminated, truncated, info = envs.step(
            oracle_led_actions(info["oracle_mask"], obs["action_mask"], rng)
        )
        progress = np.where(
            terminated | truncated, info.get("final_info", {}).get("progress", 0), info["progress"]
        )
        labels.append(np.where(progress == 1, 1.0, -1.0))
        weights.append(step_weights)
        ended = terminated | truncated
        budget[ended] = info["step_budget"][ended]  # the new episodes' budgets
    process = envs.finish_rollout()
    assert process.shape == (40, n) and process.dtype == np.float32
    assert np.allclose(process, np.array(weights) * np.array(labels))
    assert envs.rollout_votes.shape == (40, n, 3)
    assert envs.finish_rollout().shape == (0, n)  # the next rollout starts empty


@pytest.mark.parametrize("scale", ["step", "episode", "advantage"])
def test_the_process_part_reaches_the_update(scale: str) -> None:
    """Mode ``oracle``: the update gets GAE of the outcome plus the weighted process part
    (``finish_rollout``'s) as rewards (``step``, ``episode``), or GAE of the outcome plus lambda *
    z(process) as advantages, the critic keeping the outcome's returns (``advantage``)."""
    from agents.batched_ppo import generalized_advantages
    from agents.loop_runtime import zscore

    n, steps, lam = 8, 16, 0.5
    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.1, n_envs=n, n_steps=steps, batch_size=32, n_epochs=1,
                       mode="oracle", lam=lam, process_scale=scale, seed=0)  # fmt: skip
    feedback = model.feedback
    assert feedback is not None and model._stack is feedback
    ends, parts, updates = [], [], []
    step, finish = feedback.step, feedback.finish_rollout

    def recorded_step(actions: np.ndarray):
        result = step(actions)
        ends.append((result[2].copy(), result[3].copy()))
        return result

    def recorded_finish() -> np.ndarray:
        parts.append(finish())
        return parts[-1]

    feedback.step = recorded_step  # type: ignore[method-assign]
    feedback.finish_rollout = recorded_finish  # type: ignore[method-assign]
    model._update = lambda *rollout: updates.append(rollout)  # type: ignore[method-assign]
    model.learn(n * steps)
    assert len(parts) == len(updates) == 1 and len(ends) == steps
    tokens, _, _, advantages, returns = updates[0]
    terminated, truncated = (torch.tensor(np.array(c), dtype=torch.float32) for c in zip(*ends, strict=True))
    outcome, dones = terminated - truncated, torch.maximum(terminated, truncated)
    process = torch.from_numpy(parts[0])
    assert process.shape == (steps, n) and float(process.std()) > 0 and float(dones.sum()) > 0
    with torch.no_grad():  # the values the rollout saw (the policy did not change: no update ran)
        rows = [*tokens.reshape(steps, n, -1), torch.from_numpy(model._obs["tokens"])]  # type: ignore[index]
        values = torch.stack([model._heads(row)[1] for row in rows])
    gamma, gae_lambda = model.gamma, model.gae_lambda
    if scale == "advantage":
        plain = generalized_advantages(outcome, values, dones, gamma, gae_lambda)
        expected = plain + lam * torch.from_numpy(zscore(process.numpy())).float()
        expected_returns = plain + values[:-1]
    else:
        expected = generalized_advantages(outcome + process, values, dones, gamma, gae_lambda)
        expected_returns = expected + values[:-1]
    outcome_only = generalized_advantages(outcome, values, dones, gamma, gae_lambda)
    assert not torch.allclose(expected, outcome_only, atol=1e-3)  # the process part shows
    torch.testing.assert_close(advantages, expected.flatten(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(returns, expected_returns.flatten(), rtol=1e-5, atol=1e-5)


def test_prm_votes_are_drawn_for_each_step_of_the_rollout_in_place() -> None:
    """The PRM's process rewards: lambda * the mean of m votes drawn from P(vote = +1) of each
    step's (obs, action, next obs), next obs the final one where an episode ended; the votes come
    from the wrapper's generator, each sub-env's steps in a row."""
    from agents.reward_model import draw_votes

    env_id, n, steps, lam, seed = "RLA-TextNav-v0", 6, 20, 0.7, 4
    prm = ProcessRewardModel.for_env(gym.make(env_id), head="step", embed_dim=4, hidden=16, seed=0)
    envs = FeedbackVectorWrapper(_batched(env_id, n), prm, mode="policy", lam=lam, seed=seed)
    obs, info = envs.reset(seed=0)
    rng, rows = np.random.default_rng(0), []
    for _ in range(steps):
        actions = oracle_led_actions(info["oracle_mask"], obs["action_mask"], rng)
        before = obs["tokens"]
        obs, rewards, terminated, truncated, info = envs.step(actions)
        after = obs["tokens"].copy()
        for i in np.flatnonzero(terminated | truncated):
            after[i] = info["final_obs"][i]["tokens"]
        assert np.array_equal(rewards, terminated.astype(float) - truncated.astype(float))
        rows.append((before, actions, after))
    process = envs.finish_rollout()
    before, actions, after = (np.stack(column).swapaxes(0, 1) for column in zip(*rows, strict=True))
    p, _ = prm.probabilities(before.reshape(-1, 69), actions.reshape(-1), after.reshape(-1, 69))
    votes = draw_votes(p, 3, torch.Generator().manual_seed(seed)).reshape(n, steps, 3).swapaxes(0, 1)
    np.testing.assert_allclose(process, lam * votes.mean(axis=2), atol=1e-6)
    assert np.array_equal(envs.rollout_votes, votes)


def test_oracle_mode_predicts_each_episode_s_outcome_by_its_exact_labels() -> None:
    envs = FeedbackVectorWrapper(_batched("RLA-TextNav-v0", 8), None, mode="oracle")
    obs, info = envs.reset(seed=0)
    rng, predictions = np.random.default_rng(0), []
    for _ in range(60):
        obs, _, terminated, truncated, info = envs.step(
            oracle_led_actions(info["oracle_mask"], obs["action_mask"], rng)
        )
        ended = terminated | truncated
        if ended.any():
            assert np.array_equal(info["final_info"]["_rm_outcome_prediction"], ended)
            predictions += info["final_info"]["rm_outcome_prediction"][ended].tolist()
    trajectories = envs.drain()
    assert len(trajectories) > 8
    np.testing.assert_allclose(predictions, [t.labels.mean() for t in trajectories])


def _oracle_votes(mode: str, mu: float = 1.5) -> np.ndarray:
    envs = FeedbackVectorWrapper(_batched("RLA-TextNav-v0", 16), None, mode=mode, mu=mu, m=4)
    obs, info = envs.reset(seed=0)
    rng = np.random.default_rng(2)
    for _ in range(50):
        obs, _, _, _, info = envs.step(oracle_led_actions(info["oracle_mask"], obs["action_mask"], rng))
    envs.finish_rollout()
    return envs.rollout_votes


def test_noisy_oracle_keeps_each_exact_vote_with_probability_mu_over_two() -> None:
    exact, noisy = _oracle_votes("oracle"), _oracle_votes("noisy-oracle", mu=1.5)
    assert exact.shape == noisy.shape == (50, 16, 4) and set(np.unique(noisy)) == {-1.0, 1.0}
    assert abs((noisy == exact).mean() - 0.75) < 0.03  # 3,200 votes: 3 standard errors are 0.023


class _Recording(UniformCurriculum):
    """Uniform tasks; keeps every result, and trains on tasks with an even seed only."""

    def __init__(self, env_id: str) -> None:
        super().__init__(env_id, bounds=(0.0, 0.3), seed=0)
        self.results: list[EpisodeResult] = []

    def trains_on(self, task: Task) -> bool:
        return task.seed % 2 == 0

    def update(self, result: EpisodeResult) -> None:
        self.results.append(result)
        super().update(result)


def test_the_prm_s_predicted_outcomes_reach_the_curriculum() -> None:
    """With a PRM, each finished episode's ``rm_outcome_prediction`` is V of its last state
    (the value head), flagged for exactly the finished sub-envs, and the curriculum adapter
    outside passes it on with the episode's result."""
    env_id, n = "RLA-TextNav-v0", 8
    prm = ProcessRewardModel.for_env(gym.make(env_id), head="value", embed_dim=4, hidden=16, seed=0)
    curriculum = _Recording(env_id)
    feedback = FeedbackVectorWrapper(_batched(env_id, n), prm, mode="env")
    envs = CurriculumVectorWrapper(feedback, curriculum)
    obs, info = envs.reset(seed=0)
    rng, checked = np.random.default_rng(0), 0
    for _ in range(60):
        obs, _, terminated, truncated, info = envs.step(
            oracle_led_actions(info["oracle_mask"], obs["action_mask"], rng)
        )
        ended = terminated | truncated
        if ended.any():
            final = info["final_info"]
            assert np.array_equal(final["_rm_outcome_prediction"], ended)
            last = np.stack([info["final_obs"][i]["tokens"] for i in np.flatnonzero(ended)])
            assert np.allclose(final["rm_outcome_prediction"][ended], np.clip(prm.values_array(last), -1, 1))
            checked += int(ended.sum())
    assert checked == len(curriculum.results) > n
    assert all(r.rm_outcome_prediction is not None for r in curriculum.results)
    trajectories = feedback.drain()
    assert [t.task_id for t in trajectories] == [str(r.task.key) for r in curriculum.results]


def test_the_curriculum_adapter_says_which_episodes_to_train_on() -> None:
    """``training`` holds ``trains_on`` of each sub-env's running task, and batched PPO keeps
    the steps of the others out of its update."""
    from stable_baselines3.common.callbacks import CallbackList

    curriculum = _Recording("RLA-TextNav-v0")
    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.2, n_envs=8, n_steps=16, batch_size=32, n_epochs=1,
                       curriculum=curriculum, seed=0)  # fmt: skip
    adapter = model.curriculum_env
    assert adapter is not None
    model._obs, _ = adapter.reset(seed=0)
    flags, tokens, step = [], [], adapter.step

    def recorded(actions: np.ndarray):  # the flags of the step's running episodes, as it starts
        assert np.array_equal(adapter.training, [task.seed % 2 == 0 for task in adapter.running])
        flags.append(adapter.training.copy())
        tokens.append(adapter.env._tokens.astype(np.int64))  # the observations the policy just saw
        return step(actions)

    adapter.step = recorded  # type: ignore[method-assign]
    hooks = CallbackList([])
    hooks.init_callback(model)  # type: ignore[arg-type]
    rollout = model._collect(hooks)
    assert rollout is not None and len(flags) == 16
    kept = int(np.sum(flags))
    assert 0 < kept < 8 * 16 and all(len(x) == kept for x in rollout)
    expected = np.concatenate([t[f] for t, f in zip(tokens, flags, strict=True)])  # (step, env) order
    assert np.array_equal(rollout[0].numpy(), expected)
    assert len(curriculum.results) > 0


def _closed_loop(
    curriculum_class: type, *, n_epochs: int = 1, beside_update: bool = True, trainer_class: type = PRMTrainer
) -> tuple[BatchedPPO, BatchedLoopCallback, ProcessRewardModel]:
    """A small closed loop on BatchedPPO: 16 envs x 8 steps, a small value-head PRM, a
    curriculum within [0, 0.3]."""
    env_id = "RLA-TextNav-v0"
    prm = ProcessRewardModel.for_env(gym.make(env_id), head="value", embed_dim=4, hidden=16, seed=0,
                                     device="cpu")  # fmt: skip
    curriculum = curriculum_class(env_id, bounds=(0.0, 0.3), seed=0)
    model = BatchedPPO(env_id, difficulty=0.2, n_envs=16, n_steps=8, batch_size=64, n_epochs=n_epochs,
                       mode="env", prm=prm, curriculum=curriculum, seed=0)  # fmt: skip
    assert model.feedback is not None
    trainer = trainer_class(prm, "value-difference", seed=0)
    callback = BatchedLoopCallback(model.feedback, trainer, curriculum, beside_update=beside_update)
    return model, callback, prm


def test_the_closed_loop_trains_the_prm_and_logs_its_rows() -> None:
    model, callback, prm = _closed_loop(UniformCurriculum)
    start = [p.detach().clone() for p in prm.parameters()]
    probe = (np.random.default_rng(0).integers(1, 40, (32, 69)), np.zeros(32, dtype=np.int64),
             np.random.default_rng(1).integers(1, 40, (32, 69)))  # fmt: skip
    before, _ = prm.probabilities(*probe)
    model.learn(1024, callback=callback)
    assert not all(torch.equal(a, b) for a, b in zip(start, prm.parameters(), strict=True))
    after, _ = prm.probabilities(*probe)  # the lean pass the votes use follows the training
    assert np.abs(after - before).max() > 1e-4
    rows = callback.history
    assert rows and {"rm/loss", "rm/balanced_accuracy", "rm/p_over", "loop/difficulty"} <= set(rows[-1])
    assert all(0.0 <= row["loop/difficulty"] <= 0.3 for row in rows)


@pytest.mark.parametrize("mode", [mode for mode in BATCHED_MODES if MODE_FLAGS[mode].uses_prm])
def test_the_prm_trains_exactly_in_the_modes_that_train_it(mode: str) -> None:
    """Built by ``build_loop``: the PRM has a trainer and its parameters change iff the mode trains
    it; a frozen PRM (mode ``policy``) stays frozen even when a trainer is handed to the callback."""
    settings = LoopSettings(algo="batched-ppo", mode=mode, difficulty=0.1, max_difficulty=0.3, n_envs=16,
                            n_steps=8, batch_size=64, n_epochs=1, prm_embed_dim=4, prm_hidden=16,
                            device="cpu")  # fmt: skip
    trains = MODE_FLAGS[mode].trains_prm
    model, loop = build_loop(settings)
    assert isinstance(loop, BatchedLoopCallback) and loop.reward_env.prm is not None
    prm = loop.reward_env.prm
    assert (loop.trainer is not None) == trains
    if loop.trainer is None:  # the callback itself keeps a frozen PRM frozen
        loop.trainer = PRMTrainer(prm, settings.objective, seed=0)
    start = [p.detach().clone() for p in prm.parameters()]
    model.learn(512, callback=loop)
    assert loop.history and sum(row["loop/episodes"] for row in loop.history) > 16
    changed = [not torch.equal(a, b) for a, b in zip(start, prm.parameters(), strict=True)]
    assert any(changed) == trains
    assert ("rm/loss" in loop.history[-1]) == trains


def test_the_prm_s_work_beside_the_update_runs_in_a_worker_and_changes_nothing() -> None:
    """Diagnostics and PRM training in a worker thread while the policy updates: the same run
    (rows, policy, PRM, curriculum) as one after the other, each row logged in its iteration."""
    import threading

    threads: list[str] = []

    class Recording(PRMTrainer):
        def update(self, trajectories: list, epochs: int = 1) -> dict[str, float]:
            threads.append(threading.current_thread().name)
            return super().update(trajectories, epochs)

    runs = []
    for beside in (True, False):
        threads.clear()
        model, callback, _ = _closed_loop(TaskPoolCurriculum, n_epochs=2, beside_update=beside,
                                          trainer_class=Recording)  # fmt: skip
        dumped: list[float] = []
        dump = model.logger.dump

        def counting_dump(step: int = 0, _dump=dump, _model=model, _seen=dumped) -> None:
            # the rollout's row is in the logger before its iteration's dump
            _seen.append(_model.logger.name_to_value.get("loop/timesteps", float("nan")))
            _dump(step)

        model.logger.dump = counting_dump  # type: ignore[method-assign]
        model.learn(1024, callback=callback)
        assert threads and all(name.startswith("beside-update") == beside for name in threads)
        runs.append((model, callback, dumped))
    (fast, fast_cb, fast_dumps), (slow, slow_cb, slow_dumps) = runs
    assert len(fast_cb.history) == len(slow_cb.history) == 8
    assert all(np.isfinite(row["rm/loss"]) for row in fast_cb.history)  # the PRM trained every time
    for a, b in zip(fast_cb.history, slow_cb.history, strict=True):
        assert a.keys() == b.keys()
        assert all(a[k] == b[k] or (np.isnan(a[k]) and np.isnan(b[k])) for k in a)
    assert fast_dumps == slow_dumps == [128.0 * k for k in range(1, 9)]
    for a, b in ((fast.policy, slow.policy), (fast.feedback.prm, slow.feedback.prm)):  # type: ignore[union-attr]
        assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert fast_cb.curriculum.state_dict() == slow_cb.curriculum.state_dict()  # type: ignore[union-attr]
    assert fast._worker is None  # shut down when learn returns


def test_the_prm_s_work_runs_while_the_policy_updates() -> None:
    """The worker's PRM training waits for the policy's update to start: it would time out if
    the work ran before or after the update instead of beside it."""
    import threading

    started = threading.Event()

    class Waiting(PRMTrainer):
        def update(self, trajectories: list, epochs: int = 1) -> dict[str, float]:
            if not started.wait(timeout=30):
                raise AssertionError("the policy's update did not start while the PRM trained")
            started.clear()
            return super().update(trajectories, epochs)

    model, callback, _ = _closed_loop(TaskPoolCurriculum, trainer_class=Waiting)
    update = model._update

    def signalling_update(*rollout: torch.Tensor) -> None:
        started.set()
        update(*rollout)

    model._update = signalling_update  # type: ignore[method-assign]
    model.learn(512, callback=callback)
    assert len(callback.history) == 4


def test_an_error_in_the_update_still_logs_the_prm_s_finished_work() -> None:
    model, callback, _ = _closed_loop(TaskPoolCurriculum)

    def failing_update(*rollout: torch.Tensor) -> None:
        raise RuntimeError("update failed")

    model._update = failing_update  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="update failed"):
        model.learn(256, callback=callback)
    assert len(callback.history) == len(callback.replay) == 1 and model._worker is None


def test_an_error_in_the_prm_s_work_beside_the_update_reaches_learn() -> None:
    class Failing(PRMTrainer):
        def update(self, trajectories: list, epochs: int = 1) -> dict[str, float]:
            raise RuntimeError("PRM update failed")

    model, callback, _ = _closed_loop(TaskPoolCurriculum, trainer_class=Failing)
    with pytest.raises(RuntimeError, match="PRM update failed"):
        model.learn(256, callback=callback)
    assert model._worker is None
    with pytest.raises(TypeError, match="beside_update must be a bool, got 1"):
        BatchedLoopCallback(model.feedback, None, beside_update=1)  # type: ignore[arg-type]


def test_a_rollout_cut_short_by_a_callback_leaves_the_next_one_whole() -> None:
    """A callback stopping ``learn`` mid-rollout (SB3's protocol) drops that rollout's votes;
    the next ``learn`` collects and scores whole rollouts."""
    from stable_baselines3.common.callbacks import BaseCallback

    class StopAt(BaseCallback):
        def _on_step(self) -> bool:
            return self.model.num_timesteps < 24  # stops after the 3rd step of the 2nd rollout

    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.1, n_envs=8, n_steps=4, batch_size=16, n_epochs=1,
                       mode="oracle", seed=0)  # fmt: skip
    model.learn(64, callback=StopAt())
    assert model.num_timesteps == 24
    model.learn(64, reset_num_timesteps=False)
    assert model.num_timesteps == 24 + 64 and model.feedback is not None
    assert model.feedback.rollout_votes.shape == (4, 8, 3)


def test_a_rollout_cut_short_by_an_error_leaves_the_next_one_whole() -> None:
    """An exception mid-rollout (Ctrl-C in a notebook) drops that rollout's steps as a callback's
    stop does: the next ``learn`` scores whole rollouts."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Interrupt(BaseCallback):
        def _on_step(self) -> bool:
            if self.n_calls == 6:  # the 2nd step of the 2nd rollout
                raise KeyboardInterrupt
            return True

    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.1, n_envs=8, n_steps=4, batch_size=16, n_epochs=1,
                       mode="oracle", seed=0)  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        model.learn(64, callback=Interrupt())
    assert model.num_timesteps == 48 and model.feedback is not None and model.feedback._rollout == []
    model.learn(32, reset_num_timesteps=False)
    assert model.num_timesteps == 80 and model.feedback.rollout_votes.shape == (4, 8, 3)


def test_a_partial_reset_keeps_the_other_sub_envs_episodes() -> None:
    """``reset(options={"reset_mask": ...})`` starts new episodes in the masked sub-envs only: the
    others' trajectories keep every step from their first observation, and the rollout goes on."""
    noop = gym.make("RLA-TextNav-v0").unwrapped.noop_action  # never ends an episode but by its budget
    envs = FeedbackVectorWrapper(_batched("RLA-TextNav-v0", 2), None, mode="oracle")
    first, info = envs.reset(seed=0)
    budgets, first_task = info["step_budget"].copy(), info["task_key"].copy()
    waits = np.full(2, noop, dtype=np.int64)
    for _ in range(2):
        envs.step(waits)
    again, info = envs.reset(options={"reset_mask": np.array([True, False])})
    assert np.array_equal(again["tokens"][1], first["tokens"][1])  # sub-env 1 runs on
    budgets[0] = info["step_budget"][0]
    for _ in range(int(budgets.max()) + 1):
        envs.step(waits)
    ended = {int(t.task_id): t for t in envs.drain()}  # the first episode of each sub-env, by task
    assert len(envs.finish_rollout()) == 2 + int(budgets.max()) + 1  # the reset kept the rollout
    kept, restarted = ended[int(first_task[1])], ended[int(info["task_key"][0])]
    assert len(kept.actions) == budgets[1] and np.array_equal(kept.obs[0], first["tokens"][1])
    assert len(restarted.actions) == budgets[0] and np.array_equal(restarted.obs[0], again["tokens"][0])


def test_the_recorded_actions_are_a_copy_of_the_caller_s() -> None:
    """A caller that reuses its action buffer does not change the steps already recorded."""
    envs = FeedbackVectorWrapper(_batched("RLA-TextNav-v0", 2), None, mode="oracle")
    envs.reset(seed=0)
    buffer = np.zeros(2, dtype=np.int64)
    envs.step(buffer)
    buffer[:] = 5
    envs.step(buffer)
    assert envs._rollout[0][1].tolist() == [0, 0] and envs._rollout[1][1].tolist() == [5, 5]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"mode": "reward"}, ValueError, "mode 'reward' needs a ProcessRewardModel"),
        ({"mode": "oracle-potential"}, ValueError, "mode 'oracle-potential' is not for the batched path"),
        ({"mode": "oracle", "process_scale": "sum"}, ValueError, "process_scale must be one of"),
        ({"mode": "oracle", "lam": -1.0}, ValueError, "lam must be a finite number >= 0, got -1.0"),
        ({"mode": "oracle", "m": 0}, ValueError, "m must be an integer >= 1, got 0"),
        ({"mode": "outcome", "with_prm": True}, ValueError, "mode 'outcome' casts no votes: pass prm=None"),
        (
            {"mode": "oracle", "with_prm": True},
            ValueError,
            "votes with the env's exact labels: pass prm=None",
        ),
        ({"mode": "nope"}, ValueError, "mode must be one of"),
        ({"curriculum": "plr"}, TypeError, "curriculum must be an rla_gym Curriculum or None, got 'plr'"),
    ],
)
def test_bad_closed_loop_arguments_are_named(kwargs: dict, error: type, message: str) -> None:
    env_id = "RLA-TextNav-v0"
    if kwargs.pop("with_prm", False):
        kwargs["prm"] = ProcessRewardModel.for_env(gym.make(env_id), head="value", embed_dim=4, hidden=8)
    with pytest.raises(error, match=message):
        BatchedPPO(env_id, difficulty=0.2, n_envs=4, **kwargs)


def test_a_curriculum_that_needs_the_learner_s_values_is_refused() -> None:
    from rla_gym.curricula import PrioritizedLevelReplay

    with pytest.raises(ValueError, match="PrioritizedLevelReplay scores episodes with the learner's value"):
        BatchedPPO(
            "RLA-TextNav-v0", difficulty=0.2, n_envs=4, curriculum=PrioritizedLevelReplay("RLA-TextNav-v0")
        )
    with pytest.raises(ValueError, match="needs autoreset_mode SAME_STEP"):
        FeedbackVectorWrapper(gym.make_vec("RLA-TextNav-v0", num_envs=2), None, mode="oracle")
    assert "oracle-potential" not in BATCHED_MODES and "env" in BATCHED_MODES


#: A short closed-loop batched-ppo run: 32 envs x 4 steps, small minibatches, a small PRM.
TRAIN = [
    "train", "--algo", "batched-ppo", "--mode", "env", "--curriculum", "task-pool-fresh", "--difficulty",
    "0.25", "--n-envs", "32", "--n-steps", "4", "--batch-size", "64", "--n-epochs", "2", "--encoder",
    "flatten-small", "--prm-embed-dim", "4", "--prm-hidden", "16", "--checkpoint-every", "256",
    "--eval-episodes", "3", "--device", "cpu",
]  # fmt: skip


def test_rla_train_runs_the_closed_loop_on_batched_ppo_and_resumes_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main([*TRAIN, "--steps", "1024", "--out", str(out)]) == 0
    first = load_checkpoint(out / "checkpoint.pt")
    assert first["num_timesteps"] == 1024 and first["prm"] is not None and first["prm_optimizer"] is not None
    assert first["curriculum"] is not None and first["reward_votes_rng"] is not None
    assert first["history"] and {"rm/loss", "curriculum/episodes"} <= set(first["history"][-1])
    settings = LoopSettings(
        **{k: v for k, v in first["settings"].items() if k in LoopSettings.__annotations__}
    )
    model, loop = build_loop(settings)
    assert isinstance(loop, BatchedLoopCallback) and model.curriculum_env is not None
    _restore(first, model, loop)
    for name, value in loop.reward_env.prm.state_dict().items():
        assert torch.equal(value, first["prm"][name])
    assert loop.curriculum.state_dict() == first["curriculum"]
    assert main([*TRAIN, "--steps", "2048", "--out", str(out), "--resume"]) == 0
    second = load_checkpoint(out / "checkpoint.pt")
    steps = [row["loop/timesteps"] for row in second["history"]]
    assert second["num_timesteps"] == 2048 and steps[: len(first["history"])] == [
        row["loop/timesteps"] for row in first["history"]
    ]  # continued, not restarted (rows hold NaNs: compared by their steps)
    assert steps[-1] == 2048


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"mode": "oracle-potential"}, "mode 'oracle-potential' is not for algo batched-ppo"),
        ({"mode": "env", "curriculum": "plr"}, "curriculum 'plr' scores episodes with the learner's value"),
        ({"mode": "env", "history": 2}, "history 2 is not for algo batched-ppo"),
    ],
)
def test_bad_closed_loop_settings_are_refused_by_name(
    tmp_path: Path, capsys, changes: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        validate_settings(LoopSettings(**{"algo": "batched-ppo", **changes}))
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in changes.items()]
    assert main([*TRAIN, "--steps", "1024", "--out", str(tmp_path / "run"), *flags]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "run").exists()  # nothing written


def test_rla_bench_runs_the_closed_loop_rows_on_batched_ppo(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    assert main([
        "bench", "--algo", "batched-ppo", "--envs", "RLA-TextNav-v0", "--seeds", "1", "--steps", "512",
        "--eval-every", "256", "--eval-episodes", "3", "--final-eval-episodes", "3", "--levels", "0", "0.5",
        "--n-envs", "32", "--n-steps", "4", "--n-epochs", "2", "--workers", "1", "--prm-embed-dim", "4",
        "--prm-hidden", "16", "--modes", "outcome", "reward", "env", "--strategies", "task-pool-fresh",
        "--out", str(out),
    ]) == 0  # fmt: skip
    runs = {p.name: json.loads(p.read_text()) for p in (out / "runs").glob("*.json")}
    assert set(runs) == {f"RLA-TextNav-v0__{r}__s0.json" for r in ("outcome__fixed", "reward__fixed",
                                                                    "env__task-pool-fresh")}  # fmt: skip
    env_run = runs["RLA-TextNav-v0__env__task-pool-fresh__s0.json"]
    assert env_run["rm_before"] is not None and env_run["rm_after"] is not None
    assert runs["RLA-TextNav-v0__outcome__fixed__s0.json"]["rm_before"] is None


@pytest.mark.slow
def test_the_closed_loop_on_batched_ppo_learns_difficulty_zero() -> None:
    """The full loop (PRM votes, its training, the task pool within [0, 0.25]) on the lean path's
    settings. Measured, held-out stochastic success at d = 0 after 30k steps, seeds 0 / 1 / 2:
    0.94 / 0.935 / 0.93, the task pool's mean difficulty rising from 0 to 0.13-0.16; a few seconds."""
    settings = apply_preset(LoopSettings(preset="lean", mode="env", difficulty=0.0, max_difficulty=0.25),
                            given={"mode", "difficulty", "max_difficulty"})  # fmt: skip
    model, loop = build_loop(settings)
    assert isinstance(loop, BatchedLoopCallback) and model.curriculum_env is not None
    model.learn(30_000, callback=loop)
    assert {"rm/loss", "curriculum/episodes"} <= set(loop.history[-1])

    def agent(obs, info, rng) -> int:
        return int(model.predict(obs)[0])

    result = evaluate(gym.make("RLA-TextNav-v0"), agent, 0.0, heldout_seeds(200))
    assert result.success_rate >= 0.8, result
