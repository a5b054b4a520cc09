"""agents.history: the policy's history is exactly the last k observations and actions of its episode."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.env_util import make_vec_env

from agents.evaluation import evaluate_batched
from agents.history import EpisodeStarts, HistoryVecEnv, TokenHistory, history_batch_agent
from agents.loop import LoopSettings, build_loop, validate_settings
from agents.vec_env import BatchedVecEnv

ENV = "RLA-TextNav-v0"
LENGTH = 69
N_ACTIONS = 24
BASE = 47  # TextNav's largest token id is 46: action a is token 47 + a


def _expected(frames_seen: list[np.ndarray], actions_seen: list[int], k: int) -> np.ndarray:
    """The history row of an episode that saw ``frames_seen`` after ``actions_seen`` (oldest first)."""
    obs = [frames_seen[-1 - j] if j < len(frames_seen) else np.zeros(LENGTH, np.int64) for j in range(k)]
    acts = [BASE + actions_seen[-1 - j] if j < len(actions_seen) else 0 for j in range(k)]
    return np.concatenate([*obs, np.array(acts, np.int64)])


@pytest.mark.parametrize("vec", ["dummy", "batched"])
@pytest.mark.parametrize("k", [1, 3])
def test_tokens_are_the_episodes_last_k_frames_and_actions_padded_after_every_reset(vec: str, k: int) -> None:
    kwargs = {"difficulty": 0.0}  # short episodes: many autoresets
    if vec == "batched":
        inner = BatchedVecEnv(ENV, 3, seed=0, env_kwargs=kwargs)
    else:
        inner = make_vec_env(ENV, n_envs=3, seed=0, env_kwargs=kwargs)
    venv = HistoryVecEnv(inner, k)
    assert venv.observation_space["tokens"].shape == (k * LENGTH + k,)
    assert venv.observation_space["action_mask"] == inner.observation_space["action_mask"]
    assert int(venv.observation_space["tokens"].high.max()) == BASE + N_ACTIONS - 1
    obs = venv.reset()
    frames = [[obs["tokens"][i, :LENGTH].copy()] for i in range(3)]
    actions: list[list[int]] = [[] for _ in range(3)]
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(60):
        for i in range(3):
            assert np.array_equal(obs["tokens"][i], _expected(frames[i], actions[i], k))
            assert venv.observation_space.contains({key: value[i] for key, value in obs.items()})
        masks = np.stack(venv.env_method("action_masks"))
        assert np.array_equal(masks, obs["action_mask"])  # the current mask, unstacked
        act = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, _, dones, infos = venv.step(act)
        for i in range(3):
            if dones[i]:
                ended += 1
                terminal = infos[i]["terminal_observation"]["tokens"]
                last = frames[i] + [terminal[:LENGTH]]
                assert np.array_equal(terminal, _expected(last, [*actions[i], int(act[i])], k))
                frames[i], actions[i] = [obs["tokens"][i, :LENGTH].copy()], []  # nothing leaks over
            else:
                frames[i].append(obs["tokens"][i, :LENGTH].copy())
                actions[i].append(int(act[i]))
    assert ended >= 5


def test_the_history_row_shifts_and_starts_empty() -> None:
    history = TokenHistory(2, length=2, frames=2, action_base=10)
    history.start(np.array([True, True]), np.array([[1, 2], [3, 4]]))
    history.push(np.array([[5, 6], [7, 8]]), np.array([0, 1]))
    history.start(np.array([False, True]), np.array([[9, 9]]))
    assert history.tokens().tolist() == [[5, 6, 1, 2, 10, 0], [9, 9, 0, 0, 0, 0]]


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True, None])
def test_bad_history_values_are_named(bad: object) -> None:
    with pytest.raises(ValueError, match=f"history must be an integer >= 0.*{bad!r}"):
        validate_settings(LoopSettings(algo="ppo", history=bad))  # type: ignore[arg-type]
    if bad is not True and bad != -1:
        return
    with pytest.raises(ValueError, match="history must be an integer >= 1"):
        HistoryVecEnv(make_vec_env(ENV, n_envs=1), bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("algo", ["grpo", "maskable-grpo"])
def test_the_group_trainer_trains_on_the_history_and_the_prm_sees_the_env(algo: str) -> None:
    """The group trainer's samples carry each episode's history (its first step: an empty past; its
    second: the first observation and action); the PRM's trajectories keep the env's own tokens."""
    torch.set_num_threads(1)
    settings = LoopSettings(
        algo=algo, mode="reward", history=2, vec_env="batched", groups=2, group_size=4,
        difficulty=0.5, seed=0, device="cpu",
    )  # fmt: skip
    model, callback = build_loop(settings)
    assert model.observation_space["tokens"].shape == (2 * LENGTH + 2,)
    rounds, widths = [], []
    finish = model._finish_round

    def spy(tasks, trains, steps, outcomes, returns) -> None:
        rounds.append(steps)
        finish(tasks, trains, steps, outcomes, returns)
        widths.extend(t.obs.shape[1] for t in model.reward_env.finished)  # what the PRM trains on

    model._finish_round = spy  # type: ignore[method-assign]
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(300, callback=callback)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    for episode in (e for steps in rounds for e in steps):
        first, second = episode[0], episode[1]  # d = 0.5: no episode ends at its first step
        raw, seen = first[0]["tokens"], first[6]["tokens"]
        assert raw.shape == (LENGTH,) and np.array_equal(seen[:LENGTH], raw) and not seen[LENGTH:].any()
        seen = second[6]["tokens"]
        assert np.array_equal(seen[:LENGTH], second[0]["tokens"])
        assert np.array_equal(seen[LENGTH : 2 * LENGTH], raw)
        assert seen[-2] == BASE + first[1] and seen[-1] == 0
    assert len(rounds) >= 2 and widths and set(widths) == {LENGTH}


def test_a_history_must_be_a_whole_number_of_frames() -> None:
    with pytest.raises(ValueError, match="history must be an integer >= 0"):
        validate_settings(LoopSettings(algo="grpo", history=-1))


def test_history_needs_token_observations() -> None:
    flat = make_vec_env(ENV, n_envs=1, env_kwargs={"obs_mode": "flat"})
    with pytest.raises(TypeError, match="dict observation with 'tokens'"):
        HistoryVecEnv(flat, 2)


@pytest.mark.parametrize("algo", ["ppo", "maskable-ppo", "a2c"])
def test_a_real_sb3_run_trains_on_the_history_and_the_curriculum_counts_every_episode(algo: str) -> None:
    torch.set_num_threads(1)
    settings = LoopSettings(
        algo=algo, mode="env", curriculum="success-band", history=3, vec_env="batched", n_envs=4,
        n_steps=64, seed=0, device="cpu",
    )  # fmt: skip
    model, callback = build_loop(settings)
    assert isinstance(model.get_env(), HistoryVecEnv)
    assert model.observation_space["tokens"].shape == (3 * LENGTH + 3,)
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(512, callback=callback)
    assert model.num_timesteps >= 512
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    episodes = sum(int(row["loop/episodes"]) for row in callback.history)
    assert episodes > 0 and callback.curriculum.episodes == episodes  # exact task attribution


def test_the_fast_preset_takes_a_history() -> None:
    model, _ = build_loop(LoopSettings(preset="fast", mode="outcome", history=2, seed=0, device="cpu"))
    assert model.n_envs == 128 and model.observation_space["tokens"].shape == (2 * LENGTH + 2,)


def test_episode_starts_follow_disabled_and_same_step_autoresets() -> None:
    for mode in (AutoresetMode.DISABLED, AutoresetMode.SAME_STEP):
        envs = gym.make_vec(ENV, num_envs=4, vectorization_mode="vector_entry_point", autoreset_mode=mode)
        starts_of = EpisodeStarts()
        obs, info = envs.reset(seed=0)
        starts, live = starts_of(info, 4)
        assert starts.all() and live.all()
        started = 4
        for _ in range(80):
            obs, _, terminated, truncated, info = envs.step(np.asarray(info["action_mask"]).argmax(axis=1))
            starts, live = starts_of(info, 4)
            ended = terminated | truncated
            if mode == AutoresetMode.SAME_STEP:
                assert np.array_equal(starts, ended) and live.all()
            else:
                assert not starts.any() and not (live & ended).any()
            started += int(starts.sum())
        if mode == AutoresetMode.DISABLED:
            obs, info = envs.reset(seed=1)
            starts, live = starts_of(info, 4)
            assert starts.all() and live.all()
        envs.close()


def test_the_history_agent_evaluates_with_the_training_history() -> None:
    torch.set_num_threads(1)
    model, _ = build_loop(
        LoopSettings(algo="ppo", mode="outcome", history=2, n_envs=2, n_steps=16, seed=0, device="cpu")
    )
    seen: list[np.ndarray] = []
    predict = model.predict

    def recording(obs, **kwargs):
        seen.append(obs["tokens"].copy())
        return predict(obs, **kwargs)

    model.predict = recording  # type: ignore[method-assign]
    # d = 0.5: every route takes at least 4 moves, so no episode ends at its first step
    rows = evaluate_batched(ENV, history_batch_agent(model, 2, False, True), (0.5,), 3)
    assert rows[0]["episodes"] == 3 and len(seen) > 1
    first = seen[0]
    assert not first[:, LENGTH : 2 * LENGTH].any() and not first[:, -2:].any()  # a fresh episode
    # the second step holds the first observation and the first action
    assert np.array_equal(seen[1][:, LENGTH : 2 * LENGTH], first[:, :LENGTH])
    assert (seen[1][:, -2] >= BASE).all() and not seen[1][:, -1].any()


def test_the_history_agent_feeds_back_exactly_the_commands_it_chose() -> None:
    """Step k of an evaluated episode holds action tokens BASE + (the command chosen at step k - 1),
    then BASE + (the one before), as HistoryVecEnv gives them in training."""
    torch.set_num_threads(1)
    model, _ = build_loop(
        LoopSettings(algo="ppo", mode="outcome", history=2, n_envs=2, n_steps=16, seed=0, device="cpu")
    )
    seen: list[np.ndarray] = []
    chosen: list[np.ndarray] = []
    predict = model.predict

    def recording(obs, **kwargs):
        seen.append(obs["tokens"].copy())
        actions, state = predict(obs, **kwargs)
        chosen.append(np.asarray(actions).copy())
        return actions, state

    model.predict = recording  # type: ignore[method-assign]
    evaluate_batched(ENV, history_batch_agent(model, 2, False, False), (0.5,), 4)
    # d = 0.5: every route takes at least 4 moves, so the first three steps are one episode's
    assert len(seen) >= 3 and not seen[0][:, -2:].any()
    np.testing.assert_array_equal(seen[1][:, -2], BASE + chosen[0])
    assert not seen[1][:, -1].any()
    np.testing.assert_array_equal(seen[2][:, -2:], BASE + np.stack([chosen[1], chosen[0]], axis=1))


def test_episode_starts_after_a_disabled_reset_mark_only_the_reset_step() -> None:
    """DISABLED: after every row has ended and the env is reset, the rows start once, then run."""
    envs = gym.make_vec(
        ENV, num_envs=3, vectorization_mode="vector_entry_point", autoreset_mode=AutoresetMode.DISABLED,
        difficulty=0.5,
    )  # fmt: skip
    starts_of = EpisodeStarts()
    _, info = envs.reset(seed=0)
    starts_of(info, 3)
    ended = np.zeros(3, dtype=bool)
    while not ended.all():
        _, _, terminated, truncated, info = envs.step(np.asarray(info["oracle_mask"]).argmax(axis=1))
        starts_of(info, 3)
        ended |= terminated | truncated
    _, info = envs.reset(seed=1)
    starts, live = starts_of(info, 3)
    assert starts.all() and live.all()
    for _ in range(3):  # d = 0.5: every route takes at least 4 moves
        _, _, terminated, truncated, info = envs.step(np.asarray(info["action_mask"]).argmax(axis=1))
        starts, live = starts_of(info, 3)
        assert not starts.any() and live.all()
    envs.close()


def test_every_evaluation_chunk_starts_the_history_agent_with_an_empty_past(monkeypatch) -> None:
    """Tasks are played ``chunk`` at a time; a row whose episode ended on a chunk's last step was
    never shown ending, so the next chunk's first step carried its history on (a grid above one
    chunk, as the bench's final evaluation, scored otherwise than one episode at a time)."""
    import agents.evaluation as evaluation

    torch.set_num_threads(1)
    settings = LoopSettings(algo="ppo", mode="outcome", history=2, n_envs=2, n_steps=16, seed=0, device="cpu")
    model, _ = build_loop(settings)
    length = gym.make("RLA-TextNav-v0").unwrapped.token_length
    seen, resets = [], []
    predict = model.predict
    model.predict = lambda obs, **kw: (seen.append(obs["tokens"].copy()), predict(obs, **kw))[1]
    play = evaluation._play

    def counting(envs, agent, grid, success, steps) -> None:
        reset = envs.reset
        envs.reset = lambda **kw: (resets.append(len(seen)), reset(**kw))[1]
        play(envs, agent, grid, success, steps)

    monkeypatch.setattr(evaluation, "_play", counting)
    evaluate_batched("RLA-TextNav-v0", history_batch_agent(model, 2, False, True), (0.5,), 6, chunk=2)
    assert len(resets) == 3
    for k in resets:  # the first step after each chunk's reset: a fresh episode, no past
        assert not seen[k][:, length:].any()
