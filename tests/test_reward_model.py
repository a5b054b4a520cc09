"""ProcessRewardModel, its objectives and metrics; learning from outcomes only."""

from __future__ import annotations

import itertools
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

from agents.reward_model import OBJECTIVES, PRMTrainer, ProcessRewardModel, auc, evaluate_prm, resolve_device
from agents.trajectories import collect_mixture_trajectories, task_success_rates

ENV = "RLA-TextNav-v0"


@pytest.fixture(scope="module")
def env() -> gym.Env:
    return gym.make(ENV)


@pytest.fixture(scope="module")
def data() -> tuple[list, list]:
    """Mixed-success TextNav episodes (d = 0.3); train and test tasks never share seeds."""
    train = collect_mixture_trajectories(ENV, 0.3, tasks=300, seed=0)
    test = collect_mixture_trajectories(ENV, 0.3, tasks=100, seed=1, task_seed_offset=10_000_000)
    return train, test


def _steps(n: int, same: bool = False) -> dict[str, torch.Tensor]:
    obs = torch.randint(1, 40, (n, 69))
    return {
        "obs": obs,
        "action": torch.randint(0, 24, (n,)),
        "next_obs": obs.clone() if same else torch.randint(1, 40, (n, 69)),
    }


def test_votes_scores_and_devices(env) -> None:
    prm = ProcessRewardModel.for_env(env, seed=0)
    assert prm.device == resolve_device("auto") and resolve_device("cpu") == torch.device("cpu")
    steps = _steps(4000)
    votes = prm.votes(steps, m=5, generator=torch.Generator().manual_seed(0))
    assert votes.shape == (4000, 5) and set(votes.unique().tolist()) <= {-1.0, 1.0}
    p = torch.sigmoid(prm.logits(steps)).detach()
    assert abs(float(votes.eq(1).float().mean() - p.mean())) < 0.02  # votes follow sigmoid(logit)
    score = prm.score(steps)
    assert torch.allclose(score, 2 * p - 1) and score.abs().max() <= 1
    with pytest.raises(ValueError, match="m must be an integer >= 1, got 0"):
        prm.votes(steps, m=0)


def test_no_op_steps_get_the_fixed_logit(env) -> None:
    prm = ProcessRewardModel.for_env(env, seed=0, noop_logit=-4.0)
    assert torch.all(prm.logits(_steps(10, same=True)) == -4.0)
    assert not torch.any(prm.logits(_steps(10)) == -4.0)
    free = ProcessRewardModel.for_env(env, seed=0, noop_logit=None)
    assert not torch.any(free.logits(_steps(10, same=True)) == -4.0)


def test_auc_by_hand() -> None:
    assert auc([0.1, 0.4, 0.35, 0.8], [-1, -1, 1, 1]) == 0.75
    assert auc([1, 1, 0, 0], [1, -1, 1, -1]) == 0.5  # ties count half
    assert auc([3, 2, 1], [1, 1, -1]) == 1.0 and np.isnan(auc([1, 2], [1, 1]))


def test_trainer_rejects_bad_settings(env) -> None:
    prm = ProcessRewardModel.for_env(env, seed=0)
    with pytest.raises(ValueError, match="objective must be one of"):
        PRMTrainer(prm, "magic")
    with pytest.raises(ValueError, match="lam must be a finite number >= 0, got -1"):
        PRMTrainer(prm, "consistency", lam=-1)
    with pytest.raises(ValueError, match="m must be an integer >= 1, got 0"):
        PRMTrainer(prm, "consistency", m=0)
    with pytest.raises(ValueError, match="needs ProcessRewardModel\\(head='value'\\)"):
        PRMTrainer(prm, "value-difference")
    with pytest.raises(ValueError, match=r"success_band must be \(low, high\) with .* got \(0.9, 0.1\)"):
        PRMTrainer(prm, "consistency", success_band=(0.9, 0.1))
    with pytest.raises(ValueError, match="minibatch_trajectories must be an integer >= 1, got 0"):
        PRMTrainer(prm, "regression", minibatch_trajectories=0)
    with pytest.raises(ValueError, match="epochs must be an integer >= 1, got 0"):
        PRMTrainer(prm, "regression").update([], epochs=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"embed_dim": 0}, "embed_dim must be an integer >= 1, got 0"),
        ({"hidden": 2.5}, "hidden must be an integer >= 1, got 2.5"),
        ({"noop_logit": float("nan")}, "noop_logit must be a finite number or None, got nan"),
        ({"value_temperature": 0}, "value_temperature must be a finite number > 0, got 0"),
    ],
)
def test_bad_prm_settings_are_named(env, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ProcessRewardModel.for_env(env, device="cpu", **kwargs)


def test_bad_scoring_input_is_named(env) -> None:
    from agents.batched_ppo import generalized_advantages
    from agents.reward_model import draw_votes

    with pytest.raises(ValueError, match="m must be an integer >= 1, got 0"):
        draw_votes(np.array([0.5]), 0)
    with pytest.raises(ValueError, match="probabilities in \\[0, 1\\]"):
        draw_votes(np.array([0.5, 2.0]), 3)
    with pytest.raises(ValueError, match="must be 1-D and as long, got shapes \\(3,\\) and \\(2,\\)"):
        auc(np.array([0.1, 0.2, 0.3]), np.array([1, -1]))
    with pytest.raises(ValueError, match="at least one trajectory"):
        evaluate_prm(ProcessRewardModel.for_env(env, device="cpu"), [])
    with pytest.raises(ValueError, match="values one row more, got \\(4, 2\\), \\(4, 2\\) and \\(4, 2\\)"):
        generalized_advantages(torch.zeros(4, 2), torch.zeros(4, 2), torch.zeros(4, 2), 0.99, 0.95)


def test_single_rollout_tasks_are_grouped_by_difficulty() -> None:
    from agents.trajectories import Trajectory, success_groups

    def t(task, outcome, d):
        z = np.zeros((1, 69), dtype=np.int64)
        return Trajectory(z, np.zeros(1, dtype=np.int64), z, outcome, task, np.ones(1), d)

    batch = [t("a", 1, 0.3), t("a", -1, 0.3), t("b", 1, 0.3), t("c", -1, 0.31), t("d", 1, None)]
    assert success_groups(batch) == ["a", "a", "difficulty=0.3", "difficulty=0.31", "d"]
    assert task_success_rates(batch) == {"a": 0.5, "difficulty=0.3": 1.0, "difficulty=0.31": 0.0, "d": 1.0}


def test_consistency_uses_only_tasks_in_the_success_band(env, data) -> None:
    train, _ = data
    rates = task_success_rates(train)
    in_band = sum(0.2 <= rates[t.task_id] <= 0.8 for t in train)
    assert 0 < in_band < len(train)
    trainer = PRMTrainer(ProcessRewardModel.for_env(env, seed=0), "consistency")
    assert trainer.update(train[:400])["trajectories"] == sum(
        0.2 <= task_success_rates(train[:400])[t.task_id] <= 0.8 for t in train[:400]
    )
    assert (
        PRMTrainer(ProcessRewardModel.for_env(env, seed=0), "regression").update(train[:40])["trajectories"]
        == 40
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_value_difference_learns_step_labels_from_outcomes_only(env, data, seed: int) -> None:
    """Measured (benchmarks/prm_objectives.py): balanced ~0.70, AUC ~0.80; the labels never enter training.

    Over PRM seeds 0-5 on these data: balanced 0.665-0.684, AUC 0.794-0.802, outcome accuracy
    0.629-0.771 (the outcome read from the step scores varies most between seeds)."""
    train, test = data
    prm = ProcessRewardModel.for_env(env, head="value", seed=seed, device="cpu")
    PRMTrainer(prm, "value-difference", seed=seed).update(train, epochs=8)
    metrics = evaluate_prm(prm, test, warn=False)
    assert metrics["balanced_accuracy"] >= 0.65 and metrics["auc"] >= 0.75, metrics
    assert metrics["outcome_accuracy"] >= 0.6 and not metrics["collapsed"], metrics


def test_collapse_detector_fires_on_the_literal_objective(env, data) -> None:
    """Without the no-op rule the paper's literal objective collapses to voting -1 everywhere."""
    train, test = data
    prm = ProcessRewardModel.for_env(env, seed=0, noop_logit=None, device="cpu")
    PRMTrainer(prm, "consistency", seed=0).update(train, epochs=8)
    with pytest.warns(RuntimeWarning, match="PRM votes collapsed"):
        metrics = evaluate_prm(prm, test)
    assert metrics["collapsed"] == 1.0 and metrics["vote_plus_share"] < 0.05
    healthy = ProcessRewardModel.for_env(env, seed=0, device="cpu")
    PRMTrainer(healthy, "supervised").update(train, epochs=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert evaluate_prm(healthy, test)["collapsed"] == 0.0


def test_every_objective_trains_and_reports_metrics(env, data) -> None:
    train, test = data
    for objective in OBJECTIVES:
        prm = ProcessRewardModel.for_env(
            env, head="value" if objective == "value-difference" else "step", seed=0, device="cpu"
        )
        loss = PRMTrainer(prm, objective).update(train[:200])["loss"]
        assert np.isfinite(loss), objective
        metrics = evaluate_prm(prm, test[:50], warn=False)
        assert {
            "process_accuracy",
            "balanced_accuracy",
            "auc",
            "outcome_accuracy",
            "p_plus",
            "p_minus",
            "mu",
        } <= set(metrics)
        assert -1 <= prm.predict_outcome(test[0]) <= 1


WORKING = ["regression", "consistency-balanced", "value-difference", "supervised"]


@pytest.mark.parametrize("objective", WORKING)
def test_each_working_objective_learns_from_its_signal(env, data, objective: str) -> None:
    """One pass over 300 tasks' episodes moves the PRM the way its objective says, on held-out
    tasks: the outcome objectives' predicted outcomes get closer to the outcomes (squared error,
    read through ``predict_outcomes``); the value difference and the supervised objective raise
    the step labels' AUC. (In this data 81% of episodes succeed, so the step-head objectives
    mostly learn to vote +1 off the no-op steps; the literal consistency objective collapses,
    the test above.)"""
    train, test = data
    prm = ProcessRewardModel.for_env(
        env, head="value" if objective == "value-difference" else "step", seed=0, device="cpu"
    )
    outcomes = np.array([t.outcome for t in test])

    def error() -> float:
        return float(np.mean((prm.predict_outcomes(test) - outcomes) ** 2))

    before, before_auc = error(), evaluate_prm(prm, test, warn=False)["auc"]
    PRMTrainer(prm, objective, seed=0).update(train)
    after, after_auc = error(), evaluate_prm(prm, test, warn=False)["auc"]
    if objective in ("regression", "consistency-balanced"):
        assert after < 0.8 * before, (before, after)
    else:
        assert after_auc >= before_auc + 0.05, (before_auc, after_auc)


def test_value_pairs_value_each_side_once_and_exactly(env) -> None:
    """V(s), V(s') from one pass over the distinct states equal valuing both sides apart,
    where rows chain (a trajectory's steps) and where they do not, and gradients reach both."""
    prm = ProcessRewardModel.for_env(env, head="value", seed=0, device="cpu")
    g = torch.Generator().manual_seed(0)
    obs = torch.randint(1, 40, (12, 69), generator=g)
    next_obs = torch.cat([obs[1:], torch.randint(1, 40, (1, 69), generator=g)])  # chained
    next_obs[4] = torch.randint(1, 40, (69,), generator=g)  # a trajectory ends at row 4
    steps = {"obs": obs, "action": torch.zeros(12, dtype=torch.long), "next_obs": next_obs}
    values, next_values = prm.value_pairs(steps)
    torch.testing.assert_close(values, prm.values(obs))
    torch.testing.assert_close(next_values, prm.values(next_obs))
    (next_values - values).sum().backward()
    assert prm.value_net[0].weight.grad is not None and prm.value_net[0].weight.grad.abs().sum() > 0
    one = {k: v[:1] for k, v in steps.items()}  # a single row: both sides valued
    torch.testing.assert_close(prm.value_pairs(one)[1], prm.values(next_obs[:1]))


@pytest.mark.parametrize("head", ["value", "step"])
def test_lean_scoring_matches_torch_and_follows_every_weight_change(env, head: str) -> None:
    """probabilities / assess_arrays (numpy lookups, cached weights) equal assess's forward pass,
    draw the same votes from the same generator, and see optimiser steps and loaded weights."""
    from agents.reward_model import draw_votes

    prm = ProcessRewardModel.for_env(env, head=head, seed=0, device="cpu")
    steps = _steps(40)
    steps["next_obs"][:-1:2] = steps["obs"][1::2]  # some rows chain
    steps["next_obs"][5] = steps["obs"][5]  # a no-op
    steps["obs"][7] = steps["obs"][3]  # a repeated state
    arrays = (steps["obs"].numpy(), steps["action"].numpy(), steps["next_obs"].numpy())

    def check() -> None:
        votes, _, estimates = prm.assess(steps, 3, generator=torch.Generator().manual_seed(1))
        lean_votes, lean_estimates = prm.assess_arrays(*arrays, 3, generator=torch.Generator().manual_seed(1))
        p, _ = prm.probabilities(*arrays)
        np.testing.assert_allclose(p, torch.sigmoid(prm.logits(steps)).detach().numpy(), atol=1e-6)
        np.testing.assert_allclose(lean_estimates, estimates.numpy(), atol=1e-6)
        np.testing.assert_array_equal(lean_votes, votes.numpy())
        assert draw_votes(p, 3, torch.Generator().manual_seed(1)).shape == (40, 3)
        if head == "value":
            np.testing.assert_allclose(
                prm.values_array(arrays[0]), prm.values(steps["obs"]).detach().numpy(), atol=1e-6
            )

    check()
    optimizer = torch.optim.SGD(prm.parameters(), lr=1.0)
    prm.values(steps["obs"]).sum().backward() if head == "value" else prm.logits(steps).sum().backward()
    optimizer.step()  # the cached copy is stale now
    check()
    prm.load_state_dict(ProcessRewardModel.for_env(env, head=head, seed=5, device="cpu").state_dict())
    check()


@pytest.mark.parametrize(("head", "objective"), [("value", "value-difference"), ("step", "regression")])
def test_the_lean_pass_and_the_diagnostics_follow_the_trainer_s_updates(env, data, head, objective) -> None:
    """After PRMTrainer.update the lean pass (votes, predicted outcomes, diagnostics) uses the
    updated weights: it equals the torch pass and differs from the PRM before training."""
    from agents.reward_model import prm_diagnostics

    train, test = data
    prm = ProcessRewardModel.for_env(env, head=head, seed=0, device="cpu")
    steps = prm.steps(test[:20])
    arrays = (steps["obs"].numpy(), steps["action"].numpy(), steps["next_obs"].numpy())
    before, _ = prm.probabilities(*arrays)
    before_metrics, _ = prm_diagnostics(prm, test[:20], warn=False)
    PRMTrainer(prm, objective, seed=0).update(train[:128])
    after, _ = prm.probabilities(*arrays)
    with torch.no_grad():
        np.testing.assert_allclose(after, torch.sigmoid(prm.logits(steps)).numpy(), atol=1e-6)
    assert np.abs(after - before).max() > 1e-3
    after_metrics, predicted = prm_diagnostics(prm, test[:20], warn=False)
    np.testing.assert_allclose(predicted, prm.predict_outcomes(test[:20]), atol=1e-6)
    assert after_metrics != before_metrics


def test_the_lean_pass_follows_a_step_of_the_trainer_s_optimizer_taken_by_a_caller(env, data) -> None:
    """A fused Adam step leaves the parameters' versions alone; the trainer's step hook drops
    the lean copy of the weights all the same."""
    train, test = data
    prm = ProcessRewardModel.for_env(env, head="value", seed=0, device="cpu")
    steps = prm.steps(test[:20])
    arrays = (steps["obs"].numpy(), steps["action"].numpy(), steps["next_obs"].numpy())
    trainer = PRMTrainer(prm, "value-difference", seed=0)
    before, _ = prm.probabilities(*arrays)
    loss = trainer._loss(train[:64])
    assert loss is not None
    trainer.optimizer.zero_grad()
    loss.backward()
    trainer.optimizer.step()
    after, _ = prm.probabilities(*arrays)
    with torch.no_grad():
        np.testing.assert_allclose(after, torch.sigmoid(prm.logits(steps)).numpy(), atol=1e-6)
    assert np.abs(after - before).max() > 1e-5


def test_distinct_rows_is_exact_even_when_the_hash_collides(monkeypatch) -> None:
    import agents.reward_model as reward_model

    rows = np.array([[1, 2, 3], [4, 5, 6], [1, 2, 3], [7, 8, 9], [4, 5, 6]])
    index, inverse = reward_model.distinct_rows(rows)
    assert len(index) == 3 and np.array_equal(rows[index][inverse], rows)
    monkeypatch.setattr(reward_model, "_ROW_HASH", np.zeros(4096, dtype=np.int64))  # every row collides
    index, inverse = reward_model.distinct_rows(rows)
    assert len(index) == 3 and np.array_equal(rows[index][inverse], rows)


def test_a_cuda_device_without_an_index_gets_the_current_one(monkeypatch) -> None:
    from agents.reward_model import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert resolve_device("cuda") == torch.device("cuda", 1) == resolve_device("auto")
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    assert resolve_device("cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu") and resolve_device("cuda") == torch.device("cuda")


def _chain(
    outcome: int, length: int, rng: np.random.Generator, noop_at: int | None = None, task: str = "task"
):
    """A trajectory of random states whose steps chain; step ``noop_at`` leaves the state unchanged."""
    from agents.trajectories import Trajectory

    states = [rng.integers(1, 40, 69)]
    for t in range(length):
        states.append(states[-1].copy() if t == noop_at else rng.integers(1, 40, 69))
    obs, next_obs = np.stack(states[:-1]), np.stack(states[1:])
    return Trajectory(obs, rng.integers(0, 24, length), next_obs, outcome, task, np.ones(length), 0.3)


def test_the_regression_and_value_difference_losses_by_hand(env) -> None:
    """regression: MSE of each trajectory's mean step score (its predicted outcome) against the outcome;
    value-difference: MSE of V over every state, the final ones included, plus that regression on
    kappa * (V(s') - V(s)), no-op steps at the fixed logit."""
    rng = np.random.default_rng(0)
    batch = [_chain(1, 3, rng), _chain(-1, 1, rng), _chain(-1, 4, rng, noop_at=2)]
    outcomes = np.array([1.0, -1.0, -1.0])
    prm = ProcessRewardModel.for_env(env, seed=0, device="cpu")
    expected = np.mean((prm.predict_outcomes(batch) - outcomes) ** 2)
    assert float(PRMTrainer(prm, "regression")._loss(batch).detach()) == pytest.approx(expected, rel=1e-5)

    prm = ProcessRewardModel.for_env(env, head="value", seed=0, device="cpu")
    steps = prm.steps(batch)
    with torch.no_grad():
        values = [
            prm.values(torch.as_tensor(np.concatenate([t.obs, t.next_obs[-1:]]))).numpy() for t in batch
        ]
        scores = (2 * torch.sigmoid(prm.logits(steps)) - 1).numpy()
    targets = np.concatenate([np.full(len(t) + 1, t.outcome, np.float64) for t in batch])
    value_loss = np.mean((np.concatenate(values) - targets) ** 2)
    bounds = np.cumsum([0] + [len(t) for t in batch])
    means = np.array([scores[a:b].mean() for a, b in itertools.pairwise(bounds)])
    assert scores[bounds[2] + 2] == pytest.approx(2 / (1 + np.exp(4)) - 1)  # the no-op step
    loss = float(PRMTrainer(prm, "value-difference")._loss(batch).detach())
    assert loss == pytest.approx(value_loss + np.mean((means - outcomes) ** 2), rel=1e-5)


@pytest.mark.parametrize("objective", ["consistency", "consistency-balanced"])
def test_the_consistency_loss_is_the_votes_policy_gradient_by_hand(env, objective: str) -> None:
    """Vote j on step i earns R_i * S_ij, R_i = O + lambda * mean_j S_ij; its advantage is the z-score
    over the step's m votes; unanimous steps weigh 0 (balanced: 1/T, then wins and losses scaled to
    equal weight); loss = -sum(w A log P(S_ij)) / (sum(w) m), the votes drawn from the trainer's seed.
    lambda = 3: the z-score cancels |R_i|, so only with lambda * |mean vote| > 1 can R_i's sign (and
    the loss) depend on lambda."""
    rng = np.random.default_rng(1)
    batch = [_chain(1, 3, rng, noop_at=1), _chain(-1, 5, rng, noop_at=0), _chain(1, 2, rng)]
    prm = ProcessRewardModel.for_env(env, seed=0, device="cpu")
    trainer = PRMTrainer(prm, objective, lam=3.0, m=4, seed=3)
    loss = trainer._loss(batch)
    with torch.no_grad():
        logits = prm.logits(prm.steps(batch)).numpy().astype(np.float64)
    p = 1 / (1 + np.exp(-logits))
    draws = torch.rand((len(p), 4), generator=torch.Generator().manual_seed(3)).numpy()
    votes = np.where(draws < p[:, None], 1.0, -1.0)
    lengths = np.array([3, 5, 2])
    outcome = np.repeat([1.0, -1.0, 1.0], lengths)
    integrated = outcome + 3.0 * votes.mean(axis=1)
    assert np.any(np.sign(integrated) == -outcome)  # some R_i of the other sign than O
    rewards = integrated[:, None] * votes
    std = rewards.std(axis=1, keepdims=True)
    mixed = std[:, 0] > 0
    assert mixed.any() and not mixed.all()  # the no-op steps vote -1 unanimously
    advantages = np.where(std > 0, (rewards - rewards.mean(axis=1, keepdims=True)) / np.maximum(std, 1e-8), 0)
    weights = mixed.astype(np.float64)
    if objective == "consistency-balanced":
        weights = weights / np.repeat(lengths, lengths)
        for group in (outcome > 0, outcome < 0):
            weights[group] /= weights[group].sum()
    log_p = -np.log1p(np.exp(-votes * logits[:, None]))
    expected = -(weights[:, None] * advantages * log_p).sum() / (weights.sum() * 4)
    assert loss is not None and float(loss.detach()) == pytest.approx(expected, rel=1e-4)


def test_the_success_band_includes_its_edges(env) -> None:
    """Tasks at exactly 1/5 and 4/5 successes feed the consistency objectives; 0/5 and 5/5 do not."""
    rng = np.random.default_rng(2)
    batch = [
        _chain(1 if k < wins else -1, 2, rng, task=name)
        for name, wins in (("low", 1), ("high", 4), ("never", 0), ("always", 5))
        for k in range(5)
    ]
    trainer = PRMTrainer(ProcessRewardModel.for_env(env, seed=0, device="cpu"), "consistency-balanced")
    assert trainer.update(batch)["trajectories"] == 10.0
    narrow = PRMTrainer(
        ProcessRewardModel.for_env(env, seed=0, device="cpu"), "consistency", success_band=(0.3, 0.7)
    )
    assert np.isnan(narrow.update(batch)["loss"]) and narrow.update(batch)["trajectories"] == 0.0


def test_the_diagnostics_vote_metrics_by_hand(env) -> None:
    """The votes are drawn from the seed as assess draws them; the +1 share and the unanimous share
    (all +1 or all -1) count the steps that changed the observation only; p+, p- by outcome."""
    from agents.trajectories import Trajectory

    rng = np.random.default_rng(3)
    batch = [_chain(1, 6, rng, noop_at=2), _chain(-1, 5, rng, noop_at=0), _chain(1, 4, rng)]
    labels = rng.choice([-1, 1], 15)
    bounds = [0, 6, 11, 15]
    batch = [
        Trajectory(t.obs, t.actions, t.next_obs, t.outcome, t.task_id, labels[a:b], t.difficulty)
        for t, a, b in zip(batch, bounds[:-1], bounds[1:], strict=True)
    ]
    prm = ProcessRewardModel.for_env(env, seed=0, device="cpu")
    metrics = evaluate_prm(prm, batch, m=5, seed=4, warn=False)
    with torch.no_grad():
        logits = prm.logits(prm.steps(batch)).numpy()
    p = 1 / (1 + np.exp(-logits.astype(np.float64)))
    votes = np.where(
        torch.rand((15, 5), generator=torch.Generator().manual_seed(4)).numpy() < p[:, None], 1, -1
    )
    changed = np.ones(15, dtype=bool)
    changed[[2, 6]] = False  # the two no-op steps
    unanimous = np.abs(votes[changed].sum(axis=1)) == 5
    assert unanimous.any() and not unanimous.all()
    assert metrics["unanimous_share"] == pytest.approx(unanimous.mean())
    assert metrics["vote_plus_share"] == pytest.approx((votes[changed] == 1).mean())
    outcomes = np.repeat([1, -1, 1], [6, 5, 4])
    assert metrics["p_plus"] == pytest.approx((votes[outcomes == 1] == 1).mean())
    assert metrics["p_minus"] == pytest.approx((votes[outcomes == -1] == -1).mean())
    assert metrics["process_accuracy"] == pytest.approx(((logits > 0) == (labels > 0)).mean())


def test_the_prm_at_its_edges() -> None:
    """float64 weights train with every objective; the CPU fast path follows weights swapped in
    (``load_state_dict(assign=True)``); ``m`` and ``lam`` are named when they are not numbers of
    the right kind; a late-vote rollout with no step gives no process rewards."""
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env

    from agents.loop_runtime import IntegratedRewardVecEnv
    from agents.reward_model import PRMTrainer
    from agents.trajectories import collect_mixture_trajectories

    env = gym.make("RLA-TextNav-v0")
    trajectories = collect_mixture_trajectories("RLA-TextNav-v0", 0.2, tasks=2, rollouts_per_task=3, seed=0)
    for head, objective in (("step", "regression"), ("value", "value-difference")):
        prm = ProcessRewardModel.for_env(env, head=head, device="cpu", seed=0).double()
        assert PRMTrainer(prm, objective).update(trajectories)["trajectories"] == len(trajectories)
    prm = ProcessRewardModel.for_env(env, device="cpu", seed=0)
    steps = prm.steps(trajectories)
    columns = [steps[k].numpy() for k in ("obs", "action", "next_obs")]
    before = prm.probabilities(*columns)[0]
    other = ProcessRewardModel.for_env(env, device="cpu", seed=1)
    prm.load_state_dict(other.state_dict(), assign=True)
    assert np.allclose(prm.probabilities(*columns)[0], other.probabilities(*columns)[0])
    assert not np.allclose(prm.probabilities(*columns)[0], before)
    with pytest.raises(ValueError, match="m must be an integer >= 1, got 2.5"):
        prm.assess(steps, 2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lam must be a finite number >= 0, got True"):
        PRMTrainer(prm, "consistency", lam=True)  # type: ignore[arg-type]
    venv = IntegratedRewardVecEnv(make_vec_env("RLA-TextNav-v0", n_envs=2), prm, mode="reward", deferred=True)
    venv.reset()
    assert venv.finish_rollout().shape == (0, 2)
