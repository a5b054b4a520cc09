"""The group trainer: group advantages by hand, the group filter, a real training run, rla train."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from agents.grpo import GroupPPO, group_advantages, keeps_group
from agents.loop import LoopSettings, build_loop
from agents.train import TrainSettings, load_run, train
from rla_gym.curricula import FixedCurriculum, TaskPoolCurriculum


def test_group_advantages_match_a_computation_by_hand() -> None:
    # three trajectories of one task: R_i = O + lambda * mean vote per step
    rewards = [np.array([1.5, 0.5]), np.array([-1.0, -0.5, -1.5]), np.array([1.0, 1.0])]
    a0 = np.array([1.5, -1.0, 1.0])  # step 0: all three reach it
    z0 = (a0 - a0.mean()) / a0.std()  # population std
    a1 = np.array([0.5, -0.5, 1.0])
    z1 = (a1 - a1.mean()) / a1.std()
    got = group_advantages(rewards)
    np.testing.assert_allclose(got[0], [z0[0], z1[0]])
    np.testing.assert_allclose(got[1], [z0[1], z1[1], -1.5])  # step 2: one trajectory keeps its raw R
    np.testing.assert_allclose(got[2], [z0[2], z1[2]])
    # equal rewards at a step index: zero std gives 0, and those samples are dropped
    np.testing.assert_allclose(
        group_advantages([np.array([1.0, 2.0]), np.array([1.0, 0.0])]), [[0, 1], [0, -1]]
    )
    assert group_advantages([]) == []


def test_group_filter_all_keeps_every_group_and_mixed_drops_one_outcome_groups() -> None:
    assert keeps_group([1, 1, 1], "all") and keeps_group([-1, -1], "all") and keeps_group([1, -1], "all")
    assert not keeps_group([1, 1, 1], "mixed") and not keeps_group([-1, -1], "mixed")
    assert keeps_group([1, -1, -1], "mixed")
    with pytest.raises(ValueError, match="group_filter must be one of .* got 'some'"):
        keeps_group([1], "some")


def test_a_round_runs_groups_of_one_task_and_trains_on_their_advantages() -> None:
    torch.set_num_threads(1)
    settings = LoopSettings(
        algo="grpo", mode="oracle", difficulty=0.0, groups=3, group_size=4, seed=0, device="cpu"
    )
    model, callback = build_loop(settings)
    assert isinstance(model, GroupPPO) and model.env.num_envs == 12
    seen = []
    finish = model._finish_round

    def spy(tasks, trains, steps, outcomes, returns) -> None:
        seen.append((tasks, steps, outcomes))
        finish(tasks, trains, steps, outcomes, returns)

    model._finish_round = spy  # type: ignore[method-assign]
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(1, callback=callback)  # one round
    tasks, steps, outcomes = seen[0]
    assert [len({t.task_id for t in tasks[g * 4 : (g + 1) * 4]}) for g in range(3)] == [1, 1, 1]
    trajectories = callback.reward_env.drain() or []
    assert model.num_timesteps == sum(len(s) for s in steps)  # every env stepped only until its end
    assert callback.curriculum.episodes == 12
    assert all(len(s) >= 1 for s in steps) and set(outcomes.tolist()) <= {-1, 1}
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    assert callback.history and "loop/success" in callback.history[-1]
    assert not trajectories  # the loop's callback drained them for its metrics


def test_grpo_learns_textnav_at_d0_from_outcomes_alone() -> None:
    torch.set_num_threads(1)
    model, callback = build_loop(
        LoopSettings(algo="grpo", mode="outcome", difficulty=0.0, seed=0, device="cpu")
    )
    model.learn(12_000, callback=callback)
    success = [row["loop/success"] for row in callback.history]
    assert np.mean(success[-3:]) > np.mean(success[:2]) + 0.2  # random is about 0.2 here


def test_task_pool_hands_a_group_one_round_of_a_task() -> None:
    pool = TaskPoolCurriculum("RLA-TextNav-v0", pool_size=2, rollouts_per_task=4, dataset_size=None)
    group = pool.next_group(0, 4)
    assert len(set(group)) == 1
    assert pool.next_group(1, 4)[0] != group[0]  # the other slot next
    fresh = TaskPoolCurriculum("RLA-TextNav-v0", pool_size=2, rollouts_per_task=4, fresh_seeds=True)
    group = fresh.next_group(0, 4)
    assert len(set(group)) == 1
    for task in group:
        fresh.update(rla_result(task))
    assert fresh.stale == 0 and fresh.episodes == 4
    assert (
        FixedCurriculum("RLA-TextNav-v0", 0.3).next_group(0, 3)
        == [FixedCurriculum("RLA-TextNav-v0", 0.3).next_task()] * 3
    )
    with pytest.raises(ValueError, match="size must be"):
        pool.next_group(0, 0)


def rla_result(task):
    from rla_gym.curricula import EpisodeResult

    return EpisodeResult(task, 1, 1.0, 3)


def test_rla_train_with_grpo_checkpoints_resumes_and_evaluates(tmp_path) -> None:
    out = tmp_path / "run"
    settings = TrainSettings(
        algo="maskable-grpo", mode="reward", groups=2, group_size=4, steps=1500, checkpoint_every=500,
        eval_episodes=5, out=str(out), device="cpu", difficulty=0.1,
    )  # fmt: skip
    first = train(settings)
    assert first["steps"] >= 1500
    resumed = train(TrainSettings(**{**settings.__dict__, "steps": 2500, "resume": True}))
    assert resumed["steps"] >= 2500
    model, loaded = load_run(str(out))
    assert isinstance(model, GroupPPO) and model.masked and loaded.algo == "maskable-grpo"
    assert json.loads((out / "results.json").read_text())["steps"] == resumed["steps"]


def test_bad_group_settings_are_named() -> None:
    with pytest.raises(ValueError, match="group_size must be an integer >= 2, got 1"):
        build_loop(LoopSettings(algo="grpo", group_size=1))
    with pytest.raises(ValueError, match="group_filter must be one of"):
        build_loop(LoopSettings(algo="grpo", group_filter="none"))
    with pytest.raises(ValueError, match="process_scale 'advantage' is for the critic algorithms"):
        build_loop(LoopSettings(algo="grpo", process_scale="advantage"))


def test_task_pool_verdicts_say_whether_a_judged_proposal_was_accepted() -> None:
    pool = TaskPoolCurriculum("RLA-TextNav-v0", pool_size=1, rollouts_per_task=2, dataset_size=None)
    first = pool.next_group(0, 2)
    for task in first:
        pool.update(rla_result(task))  # acc 1.0: a harder proposal
    assert pool.verdict(first[0]) is None  # the active task's round judged no proposal
    proposal = pool.next_group(0, 2)
    assert pool.is_pending(proposal[0])
    for task in proposal:
        pool.update(rla_result(task))  # acc' = 1.0 is not < acc: rejected
    assert pool.verdict(proposal[0]) is False and pool.verdict(proposal[0]) is None  # read once
    for task in pool.next_group(0, 2):  # the active task's round again: another proposal
        pool.update(rla_result(task))
    proposal = pool.next_group(0, 2)
    assert pool.is_pending(proposal[0])
    for task, outcome in zip(proposal, (1, -1), strict=True):
        from rla_gym.curricula import EpisodeResult

        pool.update(EpisodeResult(task, outcome, 0.0, 3))  # acc' = 0.5: accepted
    assert pool.verdict(proposal[0]) is True


class _RejectsAll(FixedCurriculum):
    def verdict(self, task):  # every round judged a proposal that was rejected
        return False


def test_grpo_does_not_train_on_rounds_whose_proposal_was_rejected() -> None:
    torch.set_num_threads(1)
    settings = LoopSettings(algo="grpo", mode="oracle", groups=2, group_size=4, seed=0, device="cpu")
    model, callback = build_loop(settings)
    model.curriculum = callback.curriculum = _RejectsAll("RLA-TextNav-v0", 0.0)
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(1, callback=callback)
    assert model.round_stats["rejected_groups"] == 1.0 and model.round_stats["trained_share"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))


@pytest.mark.parametrize("history", [0, 2])
def test_batched_collection_runs_the_same_rounds_as_stepping_each_env(history: int) -> None:
    """On the array-state vector env the group trainer steps every env in one call; with the same
    seeds it collects exactly the rollouts the per-env path collects and trains to the same weights
    (with and without a history)."""
    from agents.vec_env import BatchedVecEnv
    from rla_gym.envs.textnav_vector import TextNavVectorEnv

    torch.set_num_threads(1)
    runs = []
    for vec_env in ("dummy", "batched"):
        settings = LoopSettings(
            algo="grpo", mode="env", difficulty=0.3, groups=8, group_size=8, seed=3, device="cpu",
            vec_env=vec_env, history=history,
        )  # fmt: skip
        model, callback = build_loop(settings)
        if vec_env == "batched":
            assert isinstance(model.env, BatchedVecEnv) and isinstance(model.env.vector, TextNavVectorEnv)
        rounds = []
        finish = model._finish_round

        def spy(tasks, trains, steps, outcomes, returns, rounds=rounds, finish=finish) -> None:
            rounds.append((tasks, steps, outcomes.copy(), returns.copy()))
            finish(tasks, trains, steps, outcomes, returns)

        model._finish_round = spy  # type: ignore[method-assign]
        model.learn(2_500, callback=callback)  # a few rounds
        runs.append((model, rounds))
    (model_a, rounds_a), (model_b, rounds_b) = runs
    assert len(rounds_a) == len(rounds_b) >= 2 and model_a.num_timesteps == model_b.num_timesteps
    for (tasks_a, steps_a, out_a, ret_a), (tasks_b, steps_b, out_b, ret_b) in zip(
        rounds_a, rounds_b, strict=True
    ):
        assert tasks_a == tasks_b
        assert np.array_equal(out_a, out_b) and np.array_equal(ret_a, ret_b)
        assert set(out_a.tolist()) == {-1, 1}  # successes and failures both happen
        for episode_a, episode_b in zip(steps_a, steps_b, strict=True):
            assert len(episode_a) == len(episode_b)
            for a, b in zip(episode_a, episode_b, strict=True):
                assert np.array_equal(a[0]["tokens"], b[0]["tokens"])
                assert np.array_equal(a[0]["action_mask"], b[0]["action_mask"])
                assert a[1:3] == b[1:3] and np.array_equal(a[3], b[3]) and a[4:6] == b[4:6]
                assert np.array_equal(a[6]["tokens"], b[6]["tokens"])
    for p, q in zip(model_a.policy.parameters(), model_b.policy.parameters(), strict=True):
        assert torch.equal(p, q)


def test_the_trainer_settings_reach_the_group_trainer_and_ppo() -> None:
    """n_epochs, batch_size, ent_coef and learning_rate reach GroupPPO (they were dropped once)."""
    fields = {"n_epochs": 3, "batch_size": 512, "ent_coef": 0.02, "learning_rate": 1e-3}
    model, _ = build_loop(
        LoopSettings(algo="grpo", mode="outcome", difficulty=0.0, seed=0, device="cpu", **fields)
    )
    assert (model.n_epochs, model.batch_size, model.ent_coef) == (3, 512, 0.02)
    assert model.lr_schedule(1.0) == pytest.approx(1e-3)
    assert model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    default, _ = build_loop(LoopSettings(algo="grpo", mode="outcome", seed=0, device="cpu"))
    assert (default.n_epochs, default.batch_size, default.lr_schedule(1.0)) == (10, 256, pytest.approx(3e-4))
    ppo, _ = build_loop(LoopSettings(algo="ppo", mode="outcome", seed=0, device="cpu", learning_rate=1e-3))
    assert ppo.lr_schedule(1.0) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="learning_rate must be a finite number >= 0, got -0.1"):
        build_loop(LoopSettings(algo="ppo", learning_rate=-0.1))


def test_plr_runs_under_the_group_trainer_scored_by_its_positive_advantages() -> None:
    """PLR's default score needs a critic's values; under the group trainer it is scored with the
    group mean as the baseline: the mean of max(group advantage, 0) over the episode's steps."""
    from rla_gym.curricula import PrioritizedLevelReplay

    torch.set_num_threads(1)
    settings = LoopSettings(
        algo="maskable-grpo", mode="env", curriculum="plr", groups=4, group_size=4, vec_env="batched",
        seed=0, device="cpu",
    )  # fmt: skip
    model, callback = build_loop(settings)
    plr = callback.curriculum
    assert isinstance(plr, PrioritizedLevelReplay) and plr.score == "external"
    seen = []
    update = plr.update

    def spy(result) -> None:
        seen.append(result.score)
        update(result)

    plr.update = spy  # type: ignore[method-assign]
    model.learn(600, callback=callback)
    assert len(seen) >= 32 and all(score is not None and score >= 0 for score in seen)
    assert any(score > 0 for score in seen) and any(level["score"] > 0 for level in plr.levels)


def test_a_curriculum_that_needs_a_critics_values_is_refused_by_name() -> None:
    """The group trainer has no critic: a curriculum scored by value estimates (PLR's GAE scores)
    fails at construction with the fix named, not at its first round."""
    from agents.policies import TokenPolicy
    from rla_gym.curricula import PrioritizedLevelReplay

    torch.set_num_threads(1)
    settings = LoopSettings(algo="grpo", mode="outcome", groups=2, group_size=2, seed=0, device="cpu")
    model, _ = build_loop(settings)
    parts = {"reward_env": model.reward_env, "group_size": 2, "device": "cpu"}
    plr = PrioritizedLevelReplay("RLA-TextNav-v0", score="positive_value_loss")
    assert plr.needs_values
    refused = "PrioritizedLevelReplay needs a critic's value estimates.*score='external'"
    with pytest.raises(ValueError, match=refused):
        GroupPPO(TokenPolicy, model.env, curriculum=plr, **parts)
    external = PrioritizedLevelReplay("RLA-TextNav-v0", score="external")
    trainer = GroupPPO(TokenPolicy, model.env, curriculum=external, **parts)
    assert trainer.curriculum is external


def _hand_round(model: GroupPPO, episodes: list[tuple[int, list[int]]], tasks: list) -> list:
    """Hand the group trainer a finished round of ``episodes``, (outcome, exact step labels) each;
    step t of episode i takes action 6 * i + t. Returns the results the curriculum was given."""
    from rla_gym.curricula import EpisodeResult

    results: list[EpisodeResult] = []
    update = model.curriculum.update
    model.curriculum.update = lambda result: (results.append(result), update(result))  # type: ignore[method-assign]
    obs = {"tokens": np.zeros(69, np.int64), "action_mask": np.ones(24, np.int8)}
    steps = [
        [(obs, 6 * i + t, -1.0, np.zeros(69, np.int64), label, 0.0, obs) for t, label in enumerate(labels)]
        for i, (_, labels) in enumerate(episodes)
    ]
    outcomes = np.array([outcome for outcome, _ in episodes])
    model._finish_round(tasks, [True] * len(tasks), steps, outcomes, np.zeros(len(tasks)))
    return results


@pytest.mark.parametrize("group_filter", ["all", "mixed"])
def test_a_round_s_samples_are_its_per_group_step_index_advantages_by_hand(group_filter: str) -> None:
    """Oracle votes (the exact labels), lambda = 0.5: R_i = O + 0.5 * label_i, z-scored per step index
    within each group only; zero advantages are dropped; "mixed" drops the group that always succeeds."""
    from rla_gym.core import Task

    torch.set_num_threads(1)
    settings = LoopSettings(
        algo="grpo", mode="oracle", lam=0.5, groups=2, group_size=2, group_filter=group_filter, seed=0,
        device="cpu",
    )  # fmt: skip
    model, _ = build_loop(settings)
    tasks = [Task("RLA-TextNav-v0", 0.1, 7)] * 2 + [Task("RLA-TextNav-v0", 0.3, 8)] * 2
    episodes = [
        (1, [1, -1]),  # group 0, R = [1.5, 0.5]
        (-1, [1, 1, -1]),  # R = [-0.5, -0.5, -1.5]; step 2 is reached by it alone: raw R
        (1, [1, -1]),  # group 1 (both succeed), R = [1.5, 0.5]
        (1, [1, 1]),  # R = [1.5, 1.5]; step 0 ties the other: advantage 0, dropped
    ]
    results = _hand_round(model, episodes, tasks)
    samples = model._samples
    actions, advantages = [0, 1, 6, 7, 8], [1.0, 1.0, -1.0, -1.0, -1.5]
    if group_filter == "all":
        actions, advantages = [*actions, 13, 19], [*advantages, -1.0, 1.0]
    assert samples is not None and samples["actions"].tolist() == actions
    np.testing.assert_allclose(samples["advantages"], advantages)
    assert model.round_stats == pytest.approx({
        "success": 0.75, "kept_groups": 1.0 if group_filter == "all" else 0.5, "rejected_groups": 0.0,
        "trained_share": len(actions) / 9,
    })  # fmt: skip
    # PLR's score: the mean of max(advantage, 0) over each episode's steps
    assert [r.score for r in results] == pytest.approx([1.0, 0.0, 0.0, 0.5])
    for result, task, (outcome, labels) in zip(results, tasks, episodes, strict=True):
        assert result.task == task and result.outcome == outcome and result.length == len(labels)
        assert np.array_equal(result.rm_votes, np.repeat(np.array(labels, np.float32)[:, None], 3, axis=1))
        assert result.rm_outcome_prediction == pytest.approx(np.mean(labels))  # this episode's votes
    finished = model.reward_env.drain()
    assert [t.task_id for t in finished] == [task.task_id for task in tasks]
    assert [t.difficulty for t in finished] == [0.1, 0.1, 0.3, 0.3]
    assert [t.labels.tolist() for t in finished] == [labels for _, labels in episodes]
    assert [t.actions.tolist() for t in finished] == [[0, 1], [6, 7, 8], [12, 13], [18, 19]]


def test_in_rm_only_mode_the_group_advantages_leave_the_outcome_out() -> None:
    """Mode rm-only: R_i = lambda * mean vote, no outcome, before the per-step-index z-score."""
    from rla_gym.core import Task

    torch.set_num_threads(1)
    settings = LoopSettings(
        algo="grpo", mode="rm-only", lam=0.5, groups=1, group_size=2, seed=0, device="cpu"
    )
    model, _ = build_loop(settings)
    assert model.reward_env.outcome_weight == 0.0

    def label_votes(rows):  # the PRM's votes stood in for by the exact labels, 3 per step
        labels = np.array([row[3] for row in rows], np.float32)
        return np.repeat(labels[:, None], 3, axis=1), labels.tolist()

    model.reward_env.vote = label_votes  # type: ignore[method-assign]
    _hand_round(model, [(1, [1, -1]), (-1, [1, 1, -1])], [Task("RLA-TextNav-v0", 0.1, 7)] * 2)
    # R = [0.5, -0.5] and [0.5, 0.5, -0.5]: step 0 ties (dropped), step 1 is z = -1 / +1, step 2 raw -0.5
    samples = model._samples
    assert samples is not None and samples["actions"].tolist() == [1, 7, 8]
    np.testing.assert_allclose(samples["advantages"], [-1.0, 1.0, -0.5])


def test_the_update_s_loss_is_the_clipped_surrogate_plus_the_k3_kl_by_hand() -> None:
    """One epoch, one minibatch: the logged loss is -mean(min(r A, clip(r, 0.8, 1.2) A)) + 0.01 * mean
    k3, at the weights before the step, with r the ratio to the log-probabilities of the round."""
    from stable_baselines3.common.logger import configure

    torch.set_num_threads(1)
    model, _ = build_loop(
        LoopSettings(algo="grpo", mode="outcome", groups=1, group_size=2, n_epochs=1, seed=0, device="cpu")
    )
    model.set_logger(configure(None, []))
    rng = np.random.default_rng(0)
    obs = {"tokens": rng.integers(1, 47, (4, 69)), "action_mask": np.ones((4, 24), np.int8)}
    actions = np.array([3, 5, 7, 11])
    with torch.no_grad():
        _, log_prob, _ = model.policy.evaluate_actions(
            model.policy.obs_to_tensor(obs)[0], torch.as_tensor(actions)
        )
    log_prob = log_prob.numpy().astype(np.float64)
    ratios = np.array([1.5, 0.5, 0.5, 1.5])  # r A is clipped in the first two, not in the last two
    advantages = np.array([1.0, -2.0, 1.0, -0.5])
    model._samples = {
        "obs": obs, "actions": actions, "log_probs": (log_prob - np.log(ratios)).astype(np.float32),
        "advantages": advantages.astype(np.float32),
    }  # fmt: skip
    model.train()
    surrogate = np.array([1.2 * 1.0, 0.8 * -2.0, 0.5 * 1.0, 1.5 * -0.5])
    k3 = 1 / ratios + np.log(ratios) - 1
    logged = model.logger.name_to_value
    assert logged["train/policy_loss"] == pytest.approx(-surrogate.mean() + 0.01 * k3.mean(), abs=1e-5)
    assert logged["train/kl_k3"] == pytest.approx(k3.mean(), abs=1e-5)
    assert logged["train/clip_fraction"] == 1.0 and logged["grpo/samples"] == 4
    assert model._samples is None  # a round's samples train once


def test_the_group_trainer_at_its_edges(tmp_path) -> None:
    """``save`` writes the policy (the reward env, which wraps the vec env, made it fail); a round
    a callback stops hands its tasks back, so every pool slot is served again; the batched path
    logs episode rewards and lengths as the DummyVecEnv path; a round's ``grpo/`` figures are in
    its own log row; bad trainer numbers are named."""
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList
    from stable_baselines3.common.logger import Logger

    torch.set_num_threads(1)
    settings = LoopSettings(algo="grpo", mode="outcome", difficulty=0.0, groups=2, group_size=4, seed=0,
                            device="cpu", vec_env="batched")  # fmt: skip
    model, callback = build_loop(settings)
    logger, rows = Logger(folder=None, output_formats=[]), []
    dump = logger.dump
    logger.dump = lambda step=0: (rows.append(dict(logger.name_to_value)), dump(step))[1]
    model.set_logger(logger)
    model.learn(1, callback=callback)  # one round
    assert rows and "grpo/success" in rows[0] and "rollout/ep_rew_mean" in rows[0]
    assert rows[0]["rollout/ep_len_mean"] > 0
    model.save(tmp_path / "grpo")
    assert (tmp_path / "grpo.zip").stat().st_size > 0

    class StopAtOnce(BaseCallback):
        def _on_step(self) -> bool:
            return False

    pool = TaskPoolCurriculum("RLA-TextNav-v0", pool_size=2, rollouts_per_task=4)
    model, callback = build_loop(LoopSettings(algo="grpo", mode="env", groups=2, group_size=4, seed=0,
                                              device="cpu", curriculum="task-pool"))  # fmt: skip
    model.curriculum = pool
    model.learn(1, callback=CallbackList([callback, StopAtOnce()]))
    assert [slot["assigned"] for slot in pool.slots] == [0, 0]  # the stopped round's tasks came back
    for name, value, message in (
        ("clip_range", -0.2, "clip_range must be a finite number > 0, got -0.2"),
        ("kl_coef", float("nan"), "kl_coef must be a finite number >= 0, got nan"),
        ("masked", "no", "masked must be a bool, got 'no'"),
        ("curriculum", None, "curriculum must be an rla_gym Curriculum, got None"),
    ):
        kwargs = {"reward_env": model.reward_env, "curriculum": FixedCurriculum("RLA-TextNav-v0", 0.0)}
        with pytest.raises((ValueError, TypeError), match=message):
            GroupPPO("MultiInputPolicy", model.env, **{**kwargs, name: value})


@pytest.mark.parametrize("vec_env", ["dummy", "batched"])
def test_sb3_callbacks_read_each_step_s_dones_and_rewards(vec_env: str) -> None:
    """``on_step`` finds SB3's ``dones`` and ``rewards`` (arrays over every env; one that waits
    for its group's others: not done, reward 0), so a callback can count episodes as SB3's own
    do: the dones it sees are the round's episodes, each once."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Episodes(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.ended, self.won = 0, 0.0

        def _on_step(self) -> bool:
            self.ended += int(self.locals["dones"].sum())
            self.won += float(self.locals["rewards"].sum())
            return True

    torch.set_num_threads(1)
    settings = LoopSettings(algo="grpo", mode="outcome", difficulty=0.0, groups=2, group_size=4, seed=0,
                            device="cpu", vec_env=vec_env)  # fmt: skip
    model, callback = build_loop(settings)
    episodes, outcomes = Episodes(), []
    finish = model._finish_round
    model._finish_round = lambda tasks, trains, steps, o, returns: (  # type: ignore[method-assign]
        outcomes.extend(o.tolist()),
        finish(tasks, trains, steps, o, returns),
    )
    model.learn(1, callback=[callback, episodes])  # one round: 8 episodes
    assert episodes.ended == 8 == len(outcomes) and episodes.won == sum(o == 1 for o in outcomes)
