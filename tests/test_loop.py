"""The closed loop: each ablation mode does what it says, on a real SB3 PPO run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from stable_baselines3.common.env_util import make_vec_env

from agents.loop import LoopSettings, build_loop
from agents.loop_runtime import IntegratedRewardVecEnv
from agents.reward_model import ProcessRewardModel


def _random_steps(env: IntegratedRewardVecEnv, steps: int):
    """Reset ``env``, then yield (rewards, dones, infos) of ``steps`` random vector steps."""
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(steps):
        _, rewards, dones, infos = env.step(rng.integers(0, 24, env.num_envs))
        yield rewards, dones, infos


def _params(prm: ProcessRewardModel) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in prm.parameters()])


@pytest.mark.parametrize("mode", ["outcome", "policy", "reward", "env"])
def test_each_mode_runs_a_real_ppo_loop(mode: str) -> None:
    model, callback = build_loop(
        LoopSettings(algo="ppo", mode=mode, n_envs=2, n_steps=256, seed=0, device="cpu")
    )
    prm = callback.reward_env.prm
    before = None if prm is None else _params(prm)
    model.learn(1024, callback=callback)
    assert model.num_timesteps >= 1024 and callback.history
    last = callback.history[-1]
    assert last["loop/episodes"] > 0
    if mode == "outcome":
        assert prm is None and not any(k.startswith("rm/") for k in last)
    else:
        assert {"rm/balanced_accuracy", "rm/auc", "rm/mu"} <= set(last)
        changed = not torch.equal(before, _params(prm))
        assert changed == (mode in ("reward", "env"))  # frozen in "policy", trained above it
    difficulties = {k: v for k, v in last.items() if k.startswith("curriculum/")}
    assert difficulties["curriculum/episodes"] > 0
    if mode != "env":
        assert difficulties["curriculum/difficulty"] == 0.2  # fixed env below the full loop
    else:  # the curriculum's tasks: the task pool starts at the bottom of its range, not at 0.2
        assert last["loop/difficulty"] == difficulties["curriculum/pool_difficulty_mean"] == 0.0


def test_integrated_rewards_reach_the_algorithm() -> None:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=2, seed=0, env_kwargs={"difficulty": 0.1})
    prm = ProcessRewardModel.for_env(venv.envs[0], seed=0, device="cpu")
    env = IntegratedRewardVecEnv(venv, prm, mode="policy", lam=0.5, m=4)
    for rewards, dones, infos in _random_steps(env, 200):
        for i, info in enumerate(infos):
            outcome = info["outcome"] if dones[i] else 0
            assert rewards[i] == pytest.approx(outcome + 0.5 * info["rm_step_votes"].mean())
            if dones[i]:
                assert isinstance(info["rm_outcome_prediction"], float)
                assert info["TimeLimit.truncated"] is False  # no bootstrap on top of the final outcome
    assert env.drain() and not env.drain()  # finished trajectories are handed over once
    outcome_only = IntegratedRewardVecEnv(make_vec_env("RLA-TextNav-v0", n_envs=1), None, mode="outcome")
    outcome_only.reset()
    _, rewards, dones, infos = outcome_only.step(np.array([23]))
    assert rewards[0] == (infos[0]["outcome"] if dones[0] else 0.0)


def test_bad_loop_settings_are_named() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        build_loop(LoopSettings(algo="ppo", mode="everything"))
    with pytest.raises(ValueError, match="curriculum must be one of .* got 'magic'"):
        build_loop(LoopSettings(algo="ppo", curriculum="magic"))
    with pytest.raises(ValueError, match="needs a ProcessRewardModel"):
        IntegratedRewardVecEnv(make_vec_env("RLA-TextNav-v0", n_envs=1), None, mode="policy")
    with pytest.raises(ValueError, match="lam must be a finite number >= 0, got -1"):
        IntegratedRewardVecEnv(make_vec_env("RLA-TextNav-v0", n_envs=1), None, mode="outcome", lam=-1)


@pytest.mark.parametrize(("algo", "encoder"), [("a2c", "flatten"), ("maskable-ppo", "lookup")])
def test_loop_runs_on_other_on_policy_algorithms(algo: str, encoder: str) -> None:
    settings = LoopSettings(algo=algo, encoder=encoder, n_envs=2, n_steps=128, device="cpu")
    model, callback = build_loop(settings)
    assert model.policy.features_extractor.encoder == encoder
    model.learn(512, callback=callback)
    assert model.num_timesteps >= 512 and {"rm/balance", "rm/p_over"} <= set(callback.history[-1])


def test_maskable_ppo_refuses_a_minibatch_of_one_sample() -> None:
    """MaskablePPO normalises a minibatch's advantages without SB3 PPO's one-sample guard: a
    rollout that leaves one sample over would train on NaN, so the settings are refused."""
    from agents.loop import validate_settings

    settings = LoopSettings(algo="maskable-ppo", n_envs=3, n_steps=43, batch_size=64, device="cpu")
    with pytest.raises(ValueError, match=r"minibatches of 64 \(batch_size 64, .* one sample .* = 129"):
        validate_settings(settings)
    for changes in ({"batch_size": 1, "n_steps": 8}, {"batch_size": 0, "n_steps": 1}):  # every one of one
        with pytest.raises(ValueError, match="minibatches of 1 "):
            validate_settings(dataclasses.replace(settings, **changes))
    validate_settings(dataclasses.replace(settings, algo="ppo"))  # PPO skips normalising one sample
    validate_settings(dataclasses.replace(settings, n_steps=44))  # a remainder of 4 is fine


def test_auto_encoder_is_lookup_lite_except_on_reason() -> None:
    from agents.loop import validate_settings
    from agents.train import TrainSettings

    assert (LoopSettings().encoder, TrainSettings().encoder) == ("flatten", "auto")  # rla train's default
    cases = [(env, "lookup-lite") for env in ("RLA-TextNav-v0", "RLA-GUI-v0", "RLA-Household-v0")]
    for env, expected in [*cases, ("RLA-Reason-v0", "flatten")]:
        for algo in ("ppo", "grpo", "batched-ppo"):
            settings = LoopSettings(env=env, algo=algo, encoder="auto", n_envs=2, n_steps=8, groups=2)
            model, _ = build_loop(dataclasses.replace(settings, device="cpu"))
            assert model.policy.features_extractor.encoder == expected, (env, algo)
    with pytest.raises(ValueError, match="encoder must be 'auto' or one of .* got 'lstm'"):
        validate_settings(LoopSettings(encoder="lstm"))


def test_plr_scores_with_the_trainers_values_and_integrated_rewards_inside_the_loop() -> None:
    model, callback = build_loop(
        LoopSettings(algo="ppo", curriculum="plr", n_envs=2, n_steps=256, device="cpu")
    )
    plr = callback.curriculum
    assert plr.score == "positive_value_loss" and callback.curriculum_env.defer_updates
    results = []
    learn = plr._learn
    plr._learn = lambda result: (results.append(result), learn(result))  # type: ignore[method-assign]
    model.learn(1024, callback=callback)
    assert len(results) == plr.episodes > 10
    assert all(r.value_estimates is not None and r.value_estimates.size == r.length for r in results)
    # the rewards PLR scores with are the buffer's: the process votes on every step, not only O
    assert any(np.any(r.rewards[:-1] != 0) for r in results if r.length > 1)
    assert len({level["score"] for level in plr.levels}) > 1


def test_the_consistency_objective_works_inside_the_loop() -> None:
    # the consistency filter groups fresh-seed tasks by difficulty, so it has data though no task repeats
    model, callback = build_loop(
        LoopSettings(
            algo="ppo",
            mode="reward",
            objective="consistency",
            difficulty=0.0,
            n_envs=2,
            n_steps=256,
            device="cpu",
        )
    )
    model.learn(2048, callback=callback)
    losses = [row["rm/loss"] for row in callback.history]
    assert any(np.isfinite(loss) for loss in losses), losses


def test_the_fresh_task_pool_feeds_every_episode_back_inside_the_loop() -> None:
    model, callback = build_loop(
        LoopSettings(algo="ppo", curriculum="task-pool-fresh", n_envs=2, n_steps=256, device="cpu", seed=1)
    )
    model.learn(2048, callback=callback)
    pool = callback.curriculum
    # fresh tasks come back from the envs and are matched to their slots: rounds get judged
    assert pool.episodes > 2 * pool.pool_size and pool.stale < pool.episodes / 2
    assert any(slot["acc"] is not None for slot in pool.slots)


@pytest.mark.parametrize("head", ["value", "step"])
def test_deferred_prm_votes_come_at_the_rollout_end_once_per_step(head: str) -> None:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=3, seed=1, env_kwargs={"difficulty": 0.1})
    prm = ProcessRewardModel.for_env(venv.envs[0], head=head, seed=0, device="cpu")
    env = IntegratedRewardVecEnv(venv, prm, mode="policy", lam=0.5, m=3, deferred=True)
    env.reset()
    rng = np.random.default_rng(0)
    steps: list[list[tuple]] = [[] for _ in range(3)]  # (obs, action, next obs) per env, this rollout
    ended = 0
    for _ in range(150):
        obs = env._last.copy()
        actions = rng.integers(0, 24, 3)
        _, rewards, dones, infos = env.step(actions)
        for i, trajectory in zip(np.flatnonzero(dones), env.drain(), strict=True):
            # the prediction is the PRM's, at the last step, though the votes come later
            expected = float(np.clip(prm.predict_outcomes([trajectory])[0], -1, 1))
            assert infos[i]["rm_outcome_prediction"] == pytest.approx(expected, abs=1e-6)
            assert "rm_votes" not in infos[i]
            ended += 1
        for i, info in enumerate(infos):
            after = info["terminal_observation"]["tokens"] if dones[i] else env._last[i]
            steps[i].append((obs[i], actions[i], after))
            assert rewards[i] == (info["outcome"] if dones[i] else 0.0)  # process part comes later
            assert "rm_step_votes" not in info
    process, votes = env.finish_rollout(), env.rollout_votes
    assert ended and process.shape == (150, 3) and votes.shape == (150, 3, 3)
    assert set(np.unique(votes)) <= {-1.0, 1.0}
    np.testing.assert_allclose(process, 0.5 * votes.mean(axis=2))  # each step voted on once, m votes
    # the votes follow p = sigmoid(logit) of the PRM on exactly these steps
    rows = [row for t in range(150) for row in (steps[0][t], steps[1][t], steps[2][t])]
    tensors = {
        "obs": torch.as_tensor(np.stack([r[0] for r in rows])),
        "action": torch.as_tensor(np.array([r[1] for r in rows])),
        "next_obs": torch.as_tensor(np.stack([r[2] for r in rows])),
    }
    p = torch.sigmoid(prm.logits(tensors)).detach().numpy()
    generator = torch.Generator().manual_seed(0)  # the env's generator, seed 0, one draw per rollout
    draws = torch.rand((len(p), 3), generator=generator).numpy()
    np.testing.assert_array_equal(votes.reshape(-1, 3), np.where(draws < p[:, None], 1.0, -1.0))
    assert env.finish_rollout().shape == (0, 3)  # handed over once


def test_deferred_oracle_votes_stay_at_the_episode_end() -> None:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=2, seed=1, env_kwargs={"difficulty": 0.1})
    env = IntegratedRewardVecEnv(venv, None, mode="oracle", lam=0.5, m=3, deferred=True)
    positions: list[list[int]] = [[], []]
    episodes = []
    for t, (_, dones, infos) in enumerate(_random_steps(env, 150)):
        for i in range(2):
            positions[i].append(t)
            if dones[i]:
                assert infos[i]["rm_votes"].shape == (len(positions[i]), 3)
                episodes.append((i, positions[i], infos[i]["rm_votes"]))
                positions[i] = []
    process = env.finish_rollout()
    assert episodes
    for i, steps, votes in episodes:
        assert np.allclose(process[steps, i], 0.5 * votes.mean(axis=1))


def _inspect_gae_callback() -> type:
    """A callback class that keeps a rollout's buffer rewards and advantages, and GAE redone from
    scratch on those rewards, bootstrapped with V(last obs) (``fresh``)."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.utils import obs_as_tensor

    class Inspect(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            buffer = self.model.rollout_buffer
            self.rewards, self.advantages = buffer.rewards.copy(), buffer.advantages.copy()
            with torch.no_grad():
                last = self.model.policy.predict_values(obs_as_tensor(self.model._last_obs, "cpu"))
            buffer.compute_returns_and_advantage(last, self.model._last_episode_starts)
            self.fresh = buffer.advantages.copy()

    return Inspect


@pytest.mark.parametrize("algo", ["ppo", "a2c", "maskable-ppo"])
def test_loop_adds_process_rewards_to_the_buffer_and_recomputes_advantages(algo: str) -> None:
    from stable_baselines3.common.callbacks import CallbackList

    Inspect = _inspect_gae_callback()
    model, loop = build_loop(LoopSettings(mode="policy", algo=algo, n_envs=2, n_steps=64, device="cpu"))
    inspect = Inspect()
    model.learn(64, callback=CallbackList([loop, inspect]))
    fractional = inspect.rewards - np.round(inspect.rewards)
    assert np.abs(fractional).max() > 0  # lambda * mean-vote parts (+-1/3) are in the buffer
    assert np.allclose(inspect.advantages, inspect.fresh)  # from the full rewards and V(s_T)


def test_rm_only_mode_rewards_process_without_outcome_and_trains_the_rm() -> None:
    model, callback = build_loop(
        LoopSettings(algo="ppo", mode="rm-only", n_envs=2, n_steps=128, seed=0, device="cpu")
    )
    assert callback.reward_env.outcome_weight == 0.0 and callback.trainer is not None
    before = _params(callback.reward_env.prm)
    model.learn(256, callback=callback)
    assert not torch.equal(before, _params(callback.reward_env.prm))
    buffer = model.rollout_buffer
    assert np.all(np.abs(buffer.rewards) <= 1.0 + 1e-6)  # lambda * mean vote only: no +-1 outcome on top
    assert 0 <= callback.history[-1]["loop/difficulty"] <= 1


@pytest.mark.parametrize(
    "curriculum",
    [
        "uniform", "success-band", "rm-balance", "task-pool", "task-pool-fresh", "plr", "learning-progress",
        "learnability",
    ],
)  # fmt: skip
def test_max_difficulty_bounds_every_curriculum(curriculum: str) -> None:
    from agents.loop import curriculum_kwargs
    from rla_gym.curricula import CURRICULA

    strategy = CURRICULA[curriculum]("RLA-TextNav-v0", seed=0, **curriculum_kwargs(curriculum, 0.3))
    assert all(strategy.next_task(i % 4).difficulty <= 0.3 for i in range(300))


def test_max_difficulty_is_validated() -> None:
    with pytest.raises(ValueError, match="difficulty 0.5 is above max_difficulty 0.25"):
        build_loop(LoopSettings(algo="ppo", difficulty=0.5, max_difficulty=0.25))
    with pytest.raises(ValueError, match="max_difficulty must be > 0"):
        build_loop(LoopSettings(algo="ppo", difficulty=0.0, max_difficulty=0.0))


def test_episode_process_scale_divides_by_each_episodes_step_budget() -> None:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=2, seed=2, env_kwargs={"difficulty": 0.3})
    prm = ProcessRewardModel.for_env(venv.envs[0], seed=0, device="cpu")
    env = IntegratedRewardVecEnv(
        venv, prm, mode="policy", lam=2.0, m=3, deferred=True, process_scale="episode"
    )
    env.reset()
    budgets = [info["step_budget"] for info in env.reset_infos]
    rng = np.random.default_rng(1)
    positions: list[list[int]] = [[], []]
    finished = []
    for t in range(120):
        _, _, dones, infos = env.step(rng.integers(0, 24, 2))
        for i in range(2):
            positions[i].append(t)
            if dones[i]:
                finished.append((i, positions[i], budgets[i]))
                positions[i], budgets[i] = [], env.reset_infos[i]["step_budget"]
    process, votes = env.finish_rollout(), env.rollout_votes
    assert finished
    for i, steps, budget in finished:  # each episode's steps weighted by its own budget
        assert np.allclose(process[steps, i], 2.0 / budget * votes[steps, i].mean(axis=1))
        assert abs(process[steps, i].sum()) <= 2.0 + 1e-6  # at most lambda over the episode
    with pytest.raises(ValueError, match="process_scale must be one of .* got 'trajectory'"):
        IntegratedRewardVecEnv(venv, prm, mode="policy", process_scale="trajectory")


def test_the_prm_trains_for_prm_epochs_on_the_last_prm_replay_rollouts(monkeypatch) -> None:
    model, callback = build_loop(
        LoopSettings(
            algo="ppo", mode="reward", prm_epochs=3, prm_replay=2, n_envs=2, n_steps=128, device="cpu"
        )
    )
    calls = []
    real = callback.trainer.update

    def spy(trajectories, epochs=1):
        calls.append((list(trajectories), epochs))
        return real(trajectories, epochs=epochs)

    monkeypatch.setattr(callback.trainer, "update", spy)
    model.learn(768, callback=callback)  # 3 rollouts
    assert [epochs for _, epochs in calls] == [3, 3, 3]
    rollouts = [int(row["loop/episodes"]) for row in callback.history]
    assert [len(pooled) for pooled, _ in calls] == [
        rollouts[0],
        rollouts[0] + rollouts[1],
        rollouts[1] + rollouts[2],
    ]
    assert calls[2][0][: rollouts[1]] == calls[1][0][rollouts[0] :]  # the window slides: oldest dropped
    with pytest.raises(ValueError, match="prm_replay must be an integer >= 1, got 0"):
        build_loop(LoopSettings(algo="ppo", prm_replay=0))
    with pytest.raises(ValueError, match="prm_epochs must be an integer >= 1, got 1.5"):
        build_loop(LoopSettings(algo="ppo", prm_epochs=1.5))  # type: ignore[arg-type]


def test_oracle_mode_votes_with_the_exact_step_labels() -> None:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=2, seed=3, env_kwargs={"difficulty": 0.3})
    env = IntegratedRewardVecEnv(venv, None, mode="oracle", lam=0.5, m=3)
    for rewards, dones, infos in _random_steps(env, 100):
        for i, info in enumerate(infos):
            label = 1.0 if info["progress"] == 1 else -1.0
            assert np.all(info["rm_step_votes"] == label)
            outcome = info["outcome"] if dones[i] else 0
            assert rewards[i] == pytest.approx(outcome + 0.5 * label)
    prm = ProcessRewardModel.for_env(venv.envs[0], seed=0, device="cpu")
    with pytest.raises(ValueError, match="mode 'oracle' votes with the env's exact labels"):
        IntegratedRewardVecEnv(venv, prm, mode="oracle")
    model, callback = build_loop(LoopSettings(algo="ppo", mode="oracle", n_envs=2, n_steps=128, device="cpu"))
    assert callback.reward_env.prm is None and callback.trainer is None
    model.learn(256, callback=callback)
    assert not any(key.startswith("rm/") for key in callback.history[-1])
    assert np.any(model.rollout_buffer.rewards != 0)


@pytest.mark.parametrize("process_scale", ["step", "episode"])
def test_oracle_potential_is_full_strength_shaping_whose_discounted_sum_telescopes(
    process_scale: str,
) -> None:
    venv = make_vec_env("RLA-GUI-v0", n_envs=2, seed=4, env_kwargs={"difficulty": 0.3})
    env = IntegratedRewardVecEnv(
        venv, None, mode="oracle-potential", lam=0.5, m=3, gamma=0.9, process_scale=process_scale
    )
    env.reset()
    starts = [info["distance"] for info in env.reset_infos]
    shaped, age, episodes, backward_jumps = np.zeros(2), np.zeros(2, dtype=int), 0, 0
    rng = np.random.default_rng(0)
    for _ in range(300):
        before = env._distances.copy()
        _, rewards, dones, infos = env.step(rng.integers(0, 24, 2))
        for i, info in enumerate(infos):
            process = rewards[i] - (info["outcome"] if dones[i] else 0)
            after = 0.0 if dones[i] else 0.9 * info["distance"]  # Phi = -distance, 0 after the end
            assert process == pytest.approx(0.5 * (before[i] - after), abs=1e-5)  # not / step budget
            backward_jumps += info["distance"] > before[i] + 1
            shaped[i] += 0.9 ** age[i] * process
            age[i] += 1
            if dones[i]:  # the discounted sum is lambda * start distance, whatever the agent did
                assert shaped[i] == pytest.approx(0.5 * starts[i], abs=1e-4)
                shaped[i], age[i], episodes = 0.0, 0, episodes + 1
                starts[i] = env.reset_infos[i]["distance"]
    assert episodes > 5 and backward_jumps > 0
    with pytest.raises(ValueError, match="mode 'oracle-potential' votes with the env's exact labels"):
        IntegratedRewardVecEnv(
            venv, ProcessRewardModel.for_env(venv.envs[0], device="cpu"), mode="oracle-potential"
        )


def test_masked_buffer_yields_only_the_trained_on_samples() -> None:
    from stable_baselines3.common.buffers import DictRolloutBuffer

    from agents.curriculum import masked_buffer_class

    venv = make_vec_env("RLA-TextNav-v0", n_envs=2, seed=0)
    buffer = masked_buffer_class(DictRolloutBuffer)(8, venv.observation_space, venv.action_space, n_envs=2)
    for t in range(8):  # sample (t, env) carries the action 10 * t + env
        obs = {k: np.zeros((2, *space.shape)) for k, space in venv.observation_space.spaces.items()}
        buffer.add(obs, np.array([[10 * t], [10 * t + 1]]), np.zeros(2), np.zeros(2, dtype=bool),
                   torch.zeros(2), torch.zeros(2))  # fmt: skip
    buffer.compute_returns_and_advantage(torch.zeros(2), np.zeros(2, dtype=bool))
    mask = np.zeros((8, 2), dtype=bool)
    mask[2:5, 0] = mask[6, 1] = True
    buffer.sample_mask = mask
    actions = sorted(int(a) for batch in buffer.get(3) for a in batch.actions.flatten())
    assert actions == [20, 30, 40, 61]
    # no minibatch of one sample: MaskablePPO normalises each one's advantages, and one's std is NaN
    assert [len(batch.actions) for batch in buffer.get(3)] == [4]  # 3 + a remainder of 1
    mask[7, 1] = True
    assert sorted(len(batch.actions) for batch in buffer.get(2)) == [2, 3]
    for batch in buffer.get(2):
        advantages = batch.advantages
        assert torch.isfinite((advantages - advantages.mean()) / (advantages.std() + 1e-8)).all()
    buffer.sample_mask = np.zeros((8, 2), dtype=bool)  # nothing to train on: zero advantages
    (batch,) = list(buffer.get(3))
    assert torch.all(batch.advantages == 0) and torch.equal(batch.returns, batch.old_values)
    one = np.zeros((8, 2), dtype=bool)
    one[3, 1] = True  # one trained-on step counts as none
    buffer.sample_mask = one
    (batch,) = list(buffer.get(3))
    assert len(batch.actions) == 16 and torch.all(batch.advantages == 0)
    buffer.reset()
    assert buffer.sample_mask is None


def test_robust_plr_keeps_new_levels_out_of_the_update() -> None:
    settings = LoopSettings(algo="ppo", curriculum="plr", n_envs=2, n_steps=128, seed=0, device="cpu")
    model, callback = build_loop(settings)
    model.learn(1024, callback=callback)
    mask = model.rollout_buffer.sample_mask
    assert mask is not None and mask.shape == (128, 2)
    assert not mask.all()  # new levels' steps are masked: PLR trains on replays only


@pytest.mark.parametrize("mu", [1.0, 1.5, 2.0])
def test_noisy_oracle_votes_have_the_asked_for_quality(mu: float) -> None:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=2, seed=3, env_kwargs={"difficulty": 0.3})
    env = IntegratedRewardVecEnv(venv, None, mode="noisy-oracle", m=3, mu=mu, deferred=True, seed=1)
    env.reset()
    rng = np.random.default_rng(0)
    labels, votes = [], []
    for _ in range(3000):
        _, _, dones, infos = env.step(rng.integers(0, 24, 2))
        for i, trajectory in zip(np.flatnonzero(dones), env.drain(), strict=True):
            labels.append(np.repeat(trajectory.labels, 3))
            votes.append(infos[i]["rm_votes"].ravel())
    labels, votes = np.concatenate(labels), np.concatenate(votes)
    p_plus, p_minus = np.mean(votes[labels == 1] == 1), np.mean(votes[labels == -1] == -1)
    assert min((labels == 1).sum(), (labels == -1).sum()) > 600  # standard errors <= 0.02
    assert p_plus == pytest.approx(mu / 2, abs=0.06) and p_minus == pytest.approx(mu / 2, abs=0.06)
    with pytest.raises(ValueError, match=r"mu must be a number in \[0, 2\] \(p\+ \+ p-\), got 2.5"):
        IntegratedRewardVecEnv(venv, None, mode="noisy-oracle", mu=2.5)


def test_advantage_process_scale_adds_lambda_z_votes_to_gae_of_the_outcome() -> None:
    settings = LoopSettings(
        algo="ppo",
        mode="oracle",
        process_scale="advantage",
        lam=0.3,
        n_envs=2,
        n_steps=64,
        seed=0,
        device="cpu",
    )
    model, callback = build_loop(settings)
    buffer = model.rollout_buffer
    seen = {}
    finish = callback.reward_env.finish_rollout

    def spy() -> np.ndarray:
        seen["votes"] = finish()
        seen["rewards"], seen["advantages"] = buffer.rewards.copy(), buffer.advantages.copy()
        return seen["votes"]

    callback.reward_env.finish_rollout = spy  # type: ignore[method-assign]
    model.learn(128, callback=callback)  # one rollout, then the update
    votes = seen["votes"]
    assert set(np.unique(votes)) <= {-1.0, 1.0}  # the exact labels, not weighted by lambda
    assert np.all(np.isin(seen["rewards"], [-1.0, 0.0, 1.0]))  # rewards carry the outcome only
    z = (votes - votes.mean()) / votes.std()
    expected = (seen["advantages"] + 0.3 * z).swapaxes(0, 1).reshape(-1, 1)  # SB3 flattens it to train
    np.testing.assert_allclose(buffer.advantages, expected, atol=1e-5)
    with pytest.raises(ValueError, match="process_scale='advantage' needs deferred=True"):
        IntegratedRewardVecEnv(model.env, None, mode="oracle", process_scale="advantage")


@pytest.mark.parametrize("algo", ["ppo", "maskable-ppo", "grpo"])
def test_the_closed_loop_runs_on_the_batched_vec_env(algo: str) -> None:
    from agents.vec_env import BatchedVecEnv

    settings = LoopSettings(
        algo=algo, vec_env="batched", n_envs=8, n_steps=64, batch_size=256, n_epochs=2, ent_coef=0.01,
        groups=2, group_size=4, seed=0, device="cpu",
    )  # fmt: skip
    model, callback = build_loop(settings)
    inner = model.env
    while hasattr(inner, "venv"):
        inner = inner.venv
    assert isinstance(inner, BatchedVecEnv)
    model.learn(1024, callback=callback)
    assert callback.curriculum.episodes > 10 and callback.history
    if algo != "grpo":
        assert model.batch_size == 256 and model.n_epochs == 2 and model.ent_coef == 0.01


def test_bad_training_path_settings_are_named() -> None:
    with pytest.raises(ValueError, match="vec_env must be one of .* got 'subproc'"):
        build_loop(LoopSettings(algo="ppo", vec_env="subproc"))
    with pytest.raises(ValueError, match="n_epochs must be an integer >= 1, got 0"):
        build_loop(LoopSettings(algo="ppo", n_epochs=0))
    with pytest.raises(ValueError, match="ent_coef must be a finite number >= 0, got -0.1"):
        build_loop(LoopSettings(algo="ppo", ent_coef=-0.1))


def test_an_unknown_env_id_lists_the_suites_ids() -> None:
    with pytest.raises(ValueError, match=r"unknown env id 'Nope-v0'; the rla-gym ids are \['RLA-GUI-v0'"):
        build_loop(LoopSettings(env="Nope-v0"))
    with pytest.raises(ValueError, match="'CartPole-v1' is not an rla-gym environment; the rla-gym ids are"):
        build_loop(LoopSettings(env="CartPole-v1"))


def test_the_fast_preset_builds_the_batched_fast_path_in_the_python_api() -> None:
    from agents.bench import BenchSettings
    from agents.loop import PRESETS, apply_preset
    from agents.vec_env import BatchedVecEnv

    model, _ = build_loop(LoopSettings(preset="fast", mode="outcome", seed=0, device="cpu"))
    fast = PRESETS["fast"]
    assert (model.n_envs, model.n_steps, model.batch_size, model.n_epochs) == (
        fast["n_envs"], fast["n_steps"], fast["batch_size"], fast["n_epochs"],
    )  # fmt: skip
    assert model.learning_rate == fast["learning_rate"]
    assert isinstance(model.get_env().unwrapped, BatchedVecEnv)
    # a field set away from its default keeps its value; rla bench's settings take it too
    assert apply_preset(LoopSettings(preset="fast", n_envs=32)).n_envs == 32
    bench = apply_preset(BenchSettings(preset="fast", n_epochs=3))
    assert (bench.vec_env, bench.n_epochs, bench.n_steps, bench.preset) == ("batched", 3, 8, "")
    with pytest.raises(ValueError, match="preset must be one of"):
        build_loop(LoopSettings(preset="quick"))


def test_the_auto_preset_picks_settings_by_env_and_keeps_those_given() -> None:
    """``auto`` (``rla train``'s default): TextNav keeps the paper's loop; the GUI, Household and
    Reason get MaskablePPO, with the curriculum alone (lambda 0) in mode env only; a trainer given
    drops the bundle (grpo at lambda 0 was never measured); a bench keeps it for its runs to resolve."""
    from agents.bench import BenchSettings
    from agents.loop import AUTO_PRESETS, apply_preset
    from agents.train import TrainCommandSettings, TrainSettings

    assert apply_preset(LoopSettings(preset="auto")) == LoopSettings()  # TextNav: grpo, lambda 1
    assert "RLA-TextNav-v0" not in AUTO_PRESETS and len(AUTO_PRESETS) == 4
    for env in ("RLA-GUI-v0", "RLA-GUI-v1", "RLA-Household-v0", "RLA-Reason-v0"):
        auto = apply_preset(LoopSettings(env=env, preset="auto"))
        assert (auto.algo, auto.lam, auto.mode, auto.preset) == ("maskable-ppo", 0.0, "env", "")
    for mode in ("rm-only", "reward", "oracle", "outcome"):  # the votes are what these test
        auto = apply_preset(LoopSettings(env="RLA-GUI-v1", preset="auto", mode=mode), {"mode"})
        assert (auto.algo, auto.lam) == ("maskable-ppo", 1.0), mode
    grpo = apply_preset(LoopSettings(env="RLA-GUI-v1", preset="auto", algo="grpo"), {"algo"})
    assert (grpo.algo, grpo.lam) == ("grpo", 1.0)
    masked = apply_preset(LoopSettings(env="RLA-GUI-v1", preset="auto", algo="maskable-ppo"), {"algo"})
    assert masked.lam == 1.0  # the full loop on MaskablePPO, as the recorded commands ran it
    assert apply_preset(LoopSettings(env="RLA-GUI-v1", preset="auto", lam=0.3)).lam == 0.3
    assert TrainSettings().preset == "" and TrainCommandSettings().preset == "auto"  # Python: none
    # a bench keeps auto for each run to resolve (agents.bench.run_settings), unless the algo is given
    assert apply_preset(BenchSettings(preset="auto", envs=("RLA-GUI-v1",))).preset == "auto"
    assert apply_preset(BenchSettings(preset="auto", envs=("RLA-GUI-v1",), algo="grpo")).preset == ""
    assert apply_preset(BenchSettings(preset="auto", algo="ppo"), {"algo"}).preset == ""
    ablation = BenchSettings(preset="auto", envs=("RLA-GUI-v1",), modes=("env", "reward"), lam=0.5)
    assert apply_preset(ablation, {"lam", "modes"}).lam == 0.5  # an ablation keeps its lambda
    other = BenchSettings(preset="auto", envs=("RLA-Other-v0",), lam=0.5)  # an env outside the suite
    assert apply_preset(other, {"lam"}).lam == 0.5
    both = BenchSettings(preset="auto", envs=("RLA-TextNav-v0", "RLA-GUI-v1"), lam=0.0)
    assert apply_preset(both, {"lam"}).lam == 0.0  # the lambda auto sets anyway: every run at 0
    for lam, given in ((0.5, None), (1.0, {"lam"})):  # a lambda auto would set (strategies alone): named
        with pytest.raises(
            ValueError, match=rf"lam {lam} with preset 'auto': .*RLA-TextNav-v0, RLA-GUI-v1, .*--preset ''"
        ):
            apply_preset(BenchSettings(preset="auto", envs=("RLA-TextNav-v0", "RLA-GUI-v1"), lam=lam), given)

    @dataclasses.dataclass
    class Other:
        preset: str = "auto"

    with pytest.raises(ValueError, match="picks settings by env: for runs on an env, not Other"):
        apply_preset(Other())
    with pytest.raises(ValueError, match=r"preset must be one of \('auto', 'fast', 'lean'\)"):
        apply_preset(LoopSettings(preset="Auto"))


def test_the_prm_takes_its_size_from_the_settings() -> None:
    _, callback = build_loop(
        LoopSettings(
            algo="ppo", mode="env", n_envs=2, n_steps=64, prm_embed_dim=4, prm_hidden=8, device="cpu"
        )
    )
    prm = callback.reward_env.prm
    assert prm.embedding.embedding_dim == 4 and prm.value_net[0].out_features == 8
    assert prm.value_net[0].in_features == 4 * 69
    with pytest.raises(ValueError, match="prm_hidden must be an integer >= 1, got 0"):
        build_loop(LoopSettings(algo="ppo", mode="env", prm_hidden=0))


def test_the_predicted_outcome_is_the_value_of_the_last_step_or_the_mean_expected_vote() -> None:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=1, seed=0)
    for head, expected in (("value", 0.7), ("step", (0.2 - 0.4 + 0.7) / 3)):
        prm = ProcessRewardModel.for_env(venv.envs[0], head=head, seed=0, device="cpu")
        env = IntegratedRewardVecEnv(venv, prm, mode="policy")
        assert env.outcome_prediction([0.2, -0.4, 0.7]) == pytest.approx(expected)
        assert env.outcome_prediction([0.5, 3.0]) == 1.0 and env.outcome_prediction([-2.0]) == -1.0  # clipped
    oracle = IntegratedRewardVecEnv(venv, None, mode="oracle")  # no PRM: the mean of the exact votes
    assert oracle.outcome_prediction([1.0, -1.0, -1.0, -1.0]) == pytest.approx(-0.5)


def test_each_finished_trajectory_carries_the_task_its_episode_started_with() -> None:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=2, seed=5, env_kwargs={"difficulty": 0.0})
    env = IntegratedRewardVecEnv(venv, None, mode="oracle", deferred=True)
    env.reset()
    started = [str(info["task_key"]) for info in env.reset_infos]
    lengths = [0, 0]
    keys = set(started)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(80):
        _, _, dones, _ = env.step(rng.integers(0, 24, 2))
        finished = env.drain()
        assert len(finished) == int(dones.sum())
        for i, trajectory in zip(np.flatnonzero(dones), finished, strict=True):
            lengths[i] += 1
            assert trajectory.task_id == started[i] and len(trajectory) == lengths[i]
            started[i], lengths[i] = str(env.reset_infos[i]["task_key"]), 0
            keys.add(started[i])
            ended += 1
        for i in np.flatnonzero(~dones):
            lengths[i] += 1
    assert ended >= 6 and len(keys) > 4  # every episode a new task


def test_noisy_oracle_predicts_each_outcome_from_its_noisy_votes() -> None:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=2, seed=3, env_kwargs={"difficulty": 0.3})
    env = IntegratedRewardVecEnv(venv, None, mode="noisy-oracle", m=3, mu=1.0, deferred=True, seed=1)
    ended = 0
    for _, dones, infos in _random_steps(env, 200):
        for i in np.flatnonzero(dones):
            votes = infos[i]["rm_votes"]
            assert infos[i]["rm_outcome_prediction"] == pytest.approx(votes.mean())  # not the exact labels
            ended += 1
    assert ended > 5


def test_a_rollout_s_history_row_is_its_success_share_episode_count_and_mean_difficulty() -> None:
    from stable_baselines3.common.logger import configure

    from agents.trajectories import Trajectory

    model, callback = build_loop(LoopSettings(algo="ppo", mode="outcome", n_envs=2, n_steps=8, device="cpu"))
    model.set_logger(configure(None, []))
    callback.init_callback(model)
    z = np.zeros((1, 69), dtype=np.int64)

    def episode(outcome: int, difficulty: float | None) -> Trajectory:
        return Trajectory(z, np.zeros(1, dtype=np.int64), z, outcome, "t", np.ones(1), difficulty)

    episodes = [episode(1, 0.2), episode(-1, 0.4), episode(-1, None), episode(1, 0.6), episode(1, 0.2)]
    callback._record_rollout(episodes)
    row = callback.history[-1]
    assert row["loop/success"] == 0.6 and row["loop/episodes"] == 5
    assert row["loop/difficulty"] == pytest.approx(0.35)  # over the episodes that name one
    callback._record_rollout([])
    assert len(callback.history) == 1  # no row without a finished episode


def test_oracle_potential_shapes_the_rewards_even_with_the_advantage_scale() -> None:
    """Potential-based shaping is a reward, at full strength whatever the scale: with
    process_scale='advantage' it still goes into the buffer's rewards and GAE is redone on them,
    not z-scored into the advantages."""
    from stable_baselines3.common.callbacks import CallbackList

    Inspect = _inspect_gae_callback()
    settings = LoopSettings(
        algo="ppo", env="RLA-GUI-v0", mode="oracle-potential", process_scale="advantage", lam=0.5, n_envs=2,
        n_steps=64, seed=0, device="cpu",
    )  # fmt: skip
    model, loop = build_loop(settings)
    seen = {}
    finish = loop.reward_env.finish_rollout
    loop.reward_env.finish_rollout = lambda: seen.setdefault("process", finish())  # type: ignore[method-assign]
    inspect = Inspect()
    model.learn(64, callback=CallbackList([loop, inspect]))
    process = seen["process"]
    # lambda * (gamma * Phi(s') - Phi(s)): not only +-lambda like votes
    assert np.abs(process).max() > 0 and not np.all(np.isin(process, [-0.5, 0.0, 0.5]))
    outcomes = inspect.rewards - process
    assert np.allclose(outcomes, np.round(outcomes)) and np.all(np.isin(np.round(outcomes), [-1, 0, 1]))
    assert np.allclose(inspect.advantages, inspect.fresh)  # GAE of the shaped rewards


def test_episode_process_scale_weights_each_step_s_reward_when_not_deferred() -> None:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=2, seed=2, env_kwargs={"difficulty": 0.3})
    prm = ProcessRewardModel.for_env(venv.envs[0], seed=0, device="cpu")
    env = IntegratedRewardVecEnv(venv, prm, mode="policy", lam=2.0, m=3, process_scale="episode")
    env.reset()
    budgets = [info["step_budget"] for info in env.reset_infos]
    rng = np.random.default_rng(1)
    ended = 0
    for _ in range(80):
        _, rewards, dones, infos = env.step(rng.integers(0, 24, 2))
        for i, info in enumerate(infos):
            outcome = info["outcome"] if dones[i] else 0
            assert rewards[i] == pytest.approx(outcome + 2.0 / budgets[i] * info["rm_step_votes"].mean())
            if dones[i]:
                budgets[i], ended = env.reset_infos[i]["step_budget"], ended + 1
    assert ended >= 2 and min(budgets) > 1


def test_a_frozen_prm_mode_does_not_train_the_prm_even_when_given_a_trainer() -> None:
    from agents.loop_runtime import RLAnythingCallback
    from agents.reward_model import PRMTrainer

    model, loop = build_loop(
        LoopSettings(algo="ppo", mode="policy", n_envs=2, n_steps=64, seed=0, device="cpu")
    )
    prm = loop.reward_env.prm
    callback = RLAnythingCallback(
        loop.reward_env, PRMTrainer(prm, "regression"), loop.curriculum, curriculum_env=loop.curriculum_env
    )
    before = _params(prm)
    model.learn(128, callback=callback)
    assert callback.history and torch.equal(before, _params(prm))
    assert not any("rm/loss" in row for row in callback.history) and len(callback.replay) == 0


def test_the_sample_mask_marks_each_step_by_whether_its_episode_is_trained_on() -> None:
    """Every other task handed out is not trained on (as robust PLR's new levels): each drained mask
    row says, per env, whether the episode it stepped at that time was one the learner trains on."""
    from agents.curriculum import CurriculumVecEnv
    from rla_gym.curricula import FixedCurriculum

    class EveryOther(FixedCurriculum):
        def __init__(self) -> None:
            super().__init__("RLA-TextNav-v0", 0.0, seed=0)
            self.trains: dict[int, bool] = {}

        def trains_on(self, task) -> bool:
            self.trains[task.key] = len(self.trains) % 2 == 1
            return self.trains[task.key]

    curriculum = EveryOther()
    env = CurriculumVecEnv(make_vec_env("RLA-TextNav-v0", n_envs=3, seed=0), curriculum)
    env.reset()
    rng = np.random.default_rng(0)
    expected, ends = [], 0
    for _ in range(40):
        expected.append([curriculum.trains[task.key] for task in env.running])
        _, _, dones, _ = env.step(rng.integers(0, 24, 3))
        ends += int(dones.sum())
    mask = env.drain_sample_mask()
    assert ends >= 6 and mask.shape == (40, 3) and 0 < mask.mean() < 1
    np.testing.assert_array_equal(mask, np.array(expected))
    assert env.drain_sample_mask().shape == (0, 3)  # handed over once
