"""The lean batched PPO (agents.batched_ppo): its advantages, a reproducible update, SB3's callback
protocol, ``rla train`` / ``rla bench --algo batched-ppo`` (checkpoint, resume, refusals), learning.
The closed loop's modes on it: ``tests/test_batched_loop.py``."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.callbacks import BaseCallback

from agents.batched_ppo import BatchedPPO, RolloutOutcomeCallback, generalized_advantages
from agents.cli import main
from agents.loop import LoopSettings, build_loop, validate_settings
from agents.train import _restore, load_checkpoint
from rla_gym.evaluation import evaluate, heldout_seeds


def test_generalized_advantages_match_sb3_rollout_buffer() -> None:
    from stable_baselines3.common.buffers import RolloutBuffer

    steps, envs, gamma, lam = 6, 3, 0.99, 0.95
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    values = rng.normal(size=(steps + 1, envs)).astype(np.float32)
    dones = (rng.random((steps, envs)) < 0.3).astype(np.float32)
    buffer = RolloutBuffer(steps, gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2), n_envs=envs,
                           gamma=gamma, gae_lambda=lam)  # fmt: skip
    for t in range(steps):  # SB3 marks the step after a done as an episode start
        starts = dones[t - 1] if t else np.zeros(envs, dtype=np.float32)
        buffer.add(np.zeros((envs, 1)), np.zeros((envs, 1)), rewards[t], starts, torch.as_tensor(values[t]),
                   torch.zeros(envs))  # fmt: skip
    buffer.compute_returns_and_advantage(torch.as_tensor(values[-1]), dones[-1])
    ours = generalized_advantages(*map(torch.as_tensor, (rewards, values, dones)), gamma, lam)
    assert np.allclose(ours.numpy(), buffer.advantages, atol=1e-5)


def _small(seed: int) -> BatchedPPO:
    return BatchedPPO(
        "RLA-TextNav-v0", difficulty=0.2, n_envs=16, n_steps=8, batch_size=64, n_epochs=2, seed=seed
    )


def test_batched_ppo_updates_its_policy_reproducibly() -> None:
    first, second, other = _small(0), _small(0), _small(1)
    start = [p.detach().clone() for p in first.policy.parameters()]
    for model in (first, second, other):
        assert model.learn(300).num_timesteps == 384  # whole rollouts of 16 x 8
    trained = list(first.policy.parameters())
    assert all(not torch.equal(a, b) for a, b in zip(start, trained, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(trained, second.policy.parameters(), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(trained, other.policy.parameters(), strict=True))
    assert set(first.outcomes) <= {-1, 1}
    obs, _ = gym.make("RLA-TextNav-v0").reset(seed=0)
    action, _ = first.predict(obs, deterministic=True)
    assert gym.spaces.Discrete(24).contains(int(action))
    with pytest.raises(ValueError, match="must be >= 2"):
        BatchedPPO("RLA-TextNav-v0", difficulty=0.2, batch_size=1)


def _one_rollout(model: BatchedPPO) -> tuple[torch.Tensor, ...]:
    """One rollout of ``model`` from its env reset with its seed: what ``_update`` takes."""
    from stable_baselines3.common.callbacks import CallbackList

    model._obs, _ = model._stack.reset(seed=model.seed)
    hooks = CallbackList([])
    hooks.init_callback(model)  # type: ignore[arg-type]
    rollout = model._collect(hooks)
    assert rollout is not None
    return rollout


def test_one_update_step_follows_ppo_s_clipped_objective() -> None:
    """One optimizer step on the whole rollout (1 epoch, 1 minibatch, no gradient clipping at work):
    its policy loss, clipped share and gradient are PPO's clipped surrogate written out by hand, on
    old log-probabilities that put ratios on both sides of the clip range, advantages of both signs."""
    eps, vf_coef = 0.2, 0.5
    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.2, n_envs=16, n_steps=8, batch_size=128, n_epochs=1,
                       clip_range=eps, vf_coef=vf_coef, max_grad_norm=1e9, seed=0)  # fmt: skip
    tokens, actions, _, _, returns = _one_rollout(model)
    rng = torch.Generator().manual_seed(0)
    log_p, value = model._heads(tokens)
    taken = log_p.gather(1, actions[:, None]).squeeze(1)
    old = taken.detach() + 1.2 * (torch.rand(len(actions), generator=rng) - 0.5)  # ratios in [0.55, 1.8]
    advantages = torch.randn(len(actions), generator=rng)
    adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    ratio = torch.exp(taken - old)
    # the surrogate, case by case: a gain's ratio is capped at 1 + eps, a loss's floored at 1 - eps
    capped = torch.where(adv >= 0, ratio.clamp(max=1 + eps), ratio.clamp(min=1 - eps))
    policy_loss = -(capped * adv).mean()
    value_loss = ((value - returns) ** 2).mean()
    parameters = list(model.policy.parameters())
    expected = torch.autograd.grad(policy_loss + vf_coef * value_loss, parameters)
    binding = ((adv > 0) & (ratio > 1 + eps)) | ((adv < 0) & (ratio < 1 - eps))
    assert 0 < int(binding.sum()) < len(adv) and bool(((ratio - 1).abs() <= eps).any())
    seen: list[list[torch.Tensor]] = []
    hook = model.policy.optimizer.register_step_pre_hook(
        lambda *_: seen.append([p.grad.detach().clone() for p in parameters])  # type: ignore[union-attr]
    )
    model._update(tokens, actions, old, advantages, returns)
    hook.remove()
    assert len(seen) == 1
    for got, want in zip(seen[0], expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    logged = model.logger.name_to_value
    assert logged["train/policy_gradient_loss"] == pytest.approx(policy_loss.item(), rel=1e-5)
    assert logged["train/value_loss"] == pytest.approx(value_loss.item(), rel=1e-5)
    assert logged["train/clip_fraction"] == pytest.approx(float(((ratio - 1).abs() > eps).float().mean()))


def test_the_entropy_bonus_raises_the_policy_s_entropy() -> None:
    """From the same weights (a peaked policy: at the uniform one the entropy has no gradient) and
    the same rollout, one update with ent_coef 1 leaves the policy's mean entropy on the rollout
    higher than before, and higher than the same update without the bonus."""
    bonus, plain = (BatchedPPO("RLA-TextNav-v0", difficulty=0.2, n_envs=16, n_steps=8, batch_size=128,
                               n_epochs=1, ent_coef=c, seed=0) for c in (1.0, 0.0))  # fmt: skip
    bias = bonus.policy.action_net.bias
    with torch.no_grad():
        bias.copy_(torch.linspace(-2, 2, bias.numel()))
    plain.policy.load_state_dict(bonus.policy.state_dict())
    rollout = _one_rollout(bonus)
    plain.generator.set_state(bonus.generator.get_state())

    def entropy(model: BatchedPPO) -> float:
        with torch.no_grad():
            log_p, _ = model._heads(rollout[0])
        return float(-(log_p.exp() * log_p).sum(-1).mean())

    before = entropy(bonus)
    assert entropy(plain) == before
    for model in (bonus, plain):
        model._update(*rollout)
    assert entropy(bonus) > before and entropy(bonus) > entropy(plain) + 1e-3


class _Calls(BaseCallback):
    """Records SB3's callback events; ``stop_at``: ``on_step`` returns False from that step on."""

    def __init__(self, stop_at: int | None = None) -> None:
        super().__init__()
        self.events: list[str] = []
        self.stop_at = stop_at

    def _on_training_start(self) -> None:
        self.events.append("start")

    def _on_rollout_start(self) -> None:
        self.events.append("rollout")

    def _on_step(self) -> bool:
        self.events.append("step")
        return self.stop_at is None or self.num_timesteps < self.stop_at

    def _on_rollout_end(self) -> None:
        self.events.append("end")

    def _on_training_end(self) -> None:
        self.events.append("done")


def test_learn_calls_sb3_callbacks_as_sb3_does() -> None:
    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.2, n_envs=8, n_steps=2, batch_size=8, n_epochs=1)
    calls = _Calls()
    model.learn(32, callback=calls)
    rollout = ["rollout", "step", "step", "end"]
    assert calls.events == ["start", *rollout * 2, "done"] and calls.num_timesteps == 32
    assert model.learn(16, callback=calls, reset_num_timesteps=False).num_timesteps == 48
    before = [p.detach().clone() for p in model.policy.parameters()]
    stopper = _Calls(stop_at=56)  # on_step returns False at 56 steps: no update on that rollout
    model.learn(32, callback=stopper, reset_num_timesteps=False)
    assert model.num_timesteps == 56 and stopper.events[-2:] == ["step", "done"]
    assert all(torch.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))


class _StepLocals(BaseCallback):
    """Keeps what SB3's callbacks read in ``self.locals`` at each step."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[np.ndarray, ...]] = []

    def _on_step(self) -> bool:
        step = self.locals
        self.seen.append((
            step["new_obs"]["tokens"].copy(), step["actions"].copy(), step["rewards"].copy(),
            step["dones"].copy(), step["vector_info"]["distance"].copy(),
        ))  # fmt: skip
        return True


def test_callbacks_see_each_step_s_arrays_under_sb3_s_names() -> None:
    """``on_step`` finds the step's ``new_obs``, ``actions``, ``rewards`` and ``dones`` (SB3's
    names, arrays over the sub-envs) and Gymnasium's info as ``vector_info``, so a callback can
    count episodes as SB3's do; the rewards and dones are those the update trains on."""
    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.1, n_envs=8, n_steps=32, batch_size=64, n_epochs=1)
    steps = _StepLocals()
    model.learn(256, callback=steps)  # one rollout
    assert len(steps.seen) == 32
    tokens, actions, rewards, dones, distance = (np.stack(x) for x in zip(*steps.seen, strict=True))
    assert tokens.shape == (32, 8, model._length) and actions.shape == rewards.shape == (32, 8)
    assert dones.dtype == np.bool_ and distance.shape == (32, 8) and (distance >= 0).all()
    assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0} and np.array_equal(rewards != 0, dones)
    assert sorted(rewards[dones].astype(int).tolist()) == sorted(model.rollout_outcomes.tolist())
    assert dones.sum() > 0  # episodes at d = 0.1 end within 32 steps
    assert np.array_equal(tokens[-1], model._obs["tokens"])  # the last new_obs: where learn left off


def test_a_new_count_starts_new_episodes_and_fps_counts_this_call() -> None:
    """``learn`` with ``reset_num_timesteps`` (the default) starts new episodes, as SB3's, without
    reseeding the sub-envs; ``time/fps`` counts the call's own steps (a resumed run's count
    of 1e9 steps is not divided by this call's seconds)."""
    from stable_baselines3.common.logger import Logger

    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.1, n_envs=8, n_steps=4, batch_size=16, n_epochs=1)
    model.learn(32)
    resets: list[dict] = []
    reset = model._stack.reset
    model._stack.reset = lambda **kwargs: (resets.append(kwargs), reset(**kwargs))[1]
    model.learn(32, reset_num_timesteps=False)
    assert resets == []  # the count goes on: so do the episodes
    model.learn(32)
    assert resets == [{}] and model.num_timesteps == 32
    logger, rows = Logger(folder=None, output_formats=[]), []
    dump = logger.dump
    logger.dump = lambda step=0: (rows.append(dict(logger.name_to_value)), dump(step))[1]
    model.set_logger(logger)
    model.num_timesteps = 10**9
    model.learn(32, reset_num_timesteps=False)
    assert rows[-1]["time/total_timesteps"] == 10**9 + 32
    assert 0 < rows[-1]["time/fps"] < 10**7  # 32 steps: a fps of 1e9 / seconds would be far above


class _Outcomes(BaseCallback):
    """Keeps each rollout's step count and finished episodes' outcomes (``model.rollout_outcomes``)."""

    def __init__(self) -> None:
        super().__init__()
        self.rollouts: list[tuple[int, np.ndarray]] = []

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.rollouts.append((self.model.num_timesteps, self.model.rollout_outcomes.copy()))


def test_rollout_outcome_rows_are_each_rollout_s_finished_episodes() -> None:
    """A row per rollout in which episodes ended: its steps, success rate, episode count, difficulty."""
    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.1, n_envs=8, n_steps=8, batch_size=32, n_epochs=1)
    outcomes, history = _Outcomes(), RolloutOutcomeCallback(0.1)
    model.learn(1024, callback=[outcomes, history])
    ended = [(steps, o) for steps, o in outcomes.rollouts if len(o)]
    assert len(outcomes.rollouts) == 16 and len(history.history) == len(ended) >= 4
    assert all(set(o) <= {-1, 1} for _, o in ended)
    rates = [float(np.mean(o == 1)) for _, o in ended]
    assert any(rate != 0.5 for rate in rates)  # the failure rate differs from the success rate
    keys = ("loop/timesteps", "loop/success", "loop/episodes", "loop/difficulty")
    expected = [
        dict(zip(keys, (float(steps), rate, len(o), 0.1), strict=True))
        for (steps, o), rate in zip(ended, rates, strict=True)
    ]
    assert history.history == expected


#: A short batched-ppo run: 32 envs x 4 steps, small minibatches.
TRAIN = [
    "train", "--algo", "batched-ppo", "--mode", "outcome", "--difficulty", "0.25", "--n-envs", "32",
    "--n-steps", "4", "--batch-size", "64", "--n-epochs", "2", "--encoder", "flatten-small",
    "--checkpoint-every", "256", "--eval-episodes", "3", "--device", "cpu",
]  # fmt: skip


def test_rla_train_batched_ppo_checkpoints_resumes_with_fresh_episodes_and_evaluates(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main([*TRAIN, "--steps", "1024", "--out", str(out)]) == 0
    first = load_checkpoint(out / "checkpoint.pt")
    assert first["num_timesteps"] == 1024 and first["n_updates"] == 2 * 1024 // 128
    assert first["rng"]["algo"] is not None and first["prm"] is None and first["curriculum"] is None
    assert first["history"] and {"loop/timesteps", "loop/success", "loop/episodes", "loop/difficulty"} <= set(
        first["history"][0]
    )
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 1024 and len(results["evaluation"]) == 5

    # what a resume restores: the checkpoint's policy, optimizer, step counter, history and generator;
    # the vector env's episodes are not saved, so it starts fresh ones (seeded seed + num_timesteps)
    settings = LoopSettings(
        **{k: v for k, v in first["settings"].items() if k in LoopSettings.__annotations__}
    )
    model, loop = build_loop(settings)
    _restore(first, model, loop)
    assert model.num_timesteps == 1024 and loop.history == first["history"] and model._obs is None
    for name, value in model.policy.state_dict().items():
        assert torch.equal(value, first["policy"][name])
    assert (
        model.policy.optimizer.state_dict()["state"][0]["step"]
        == first["policy_optimizer"]["state"][0]["step"]
    )
    assert torch.equal(model.generator.get_state(), first["rng"]["algo"])
    model.learn(128, callback=loop, reset_num_timesteps=False)
    assert model.num_timesteps == 1152 and loop.history[-1]["loop/timesteps"] == 1152

    assert main([*TRAIN, "--steps", "2048", "--out", str(out), "--resume"]) == 0
    second = load_checkpoint(out / "checkpoint.pt")
    assert second["num_timesteps"] == 2048 and second["n_updates"] == 2 * 2048 // 128
    assert second["history"][: len(first["history"])] == first["history"]  # continued, not restarted
    assert second["history"][-1]["loop/timesteps"] == 2048
    with open(out / "progress.csv") as f:
        steps = [int(float(row["time/total_timesteps"])) for row in csv.DictReader(f)]
    assert steps == list(range(128, 2049, 128))  # the first run's rows, then the resumed run's
    assert json.loads((out / "results.json").read_text())["steps"] == 2048


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"mode": "oracle-potential"}, "mode 'oracle-potential' is not for algo batched-ppo"),
        ({"history": 2}, "history 2 is not for algo batched-ppo"),
        ({"batch_size": 1}, "batch_size must be >= 2 for batched-ppo"),
    ],
)
def test_bad_batched_ppo_settings_are_refused_by_name(
    tmp_path: Path, capsys, changes: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        validate_settings(LoopSettings(**{"algo": "batched-ppo", "mode": "outcome", **changes}))
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in changes.items()]
    assert main([*TRAIN, "--steps", "1024", "--out", str(tmp_path / "run"), *flags]) == 2
    flag = "--" + message.split(" ", 1)[0].replace("_", "-")  # the command line names its flag
    err = capsys.readouterr().err
    assert flag + message[message.index(" ") :] in err and not (tmp_path / "run").exists()  # nothing written


def test_rla_bench_runs_batched_ppo_outcome_rows_and_refuses_other_modes(tmp_path: Path, capsys) -> None:
    out = tmp_path / "bench"
    common = [
        "bench", "--algo", "batched-ppo", "--envs", "RLA-TextNav-v0", "--seeds", "1", "--steps", "512",
        "--eval-every", "256", "--eval-episodes", "3", "--final-eval-episodes", "3", "--levels", "0", "0.5",
        "--n-envs", "32", "--n-steps", "4", "--n-epochs", "2", "--workers", "1",
    ]  # fmt: skip
    assert main([*common, "--modes", "outcome", "oracle-potential", "--out", str(out)]) == 2
    assert (
        "mode 'oracle-potential' is not for algo batched-ppo" in capsys.readouterr().err and not out.exists()
    )
    assert main([*common, "--modes", "outcome", "--out", str(out)]) == 0
    record = json.loads((out / "runs" / "RLA-TextNav-v0__outcome__fixed__s0.json").read_text())
    assert record["settings"]["algo"] == "batched-ppo" and record["rm_before"] is None
    assert [e["step"] for e in record["evaluations"]] == [0, 256, 512] and record["history"]
    assert all(row["loop/difficulty"] == 0.25 for row in record["history"])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_batched_ppo_learns_difficulty_zero(seed: int) -> None:
    """Measured, held-out greedy success at 10k / 20k / 30k steps: 0.42 / 0.995 / 1.0 (seed 0),
    0.205 / 0.86 / 1.0 (seed 1); a few seconds each."""
    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.0, seed=seed).learn(30_000)

    def agent(obs, info, rng) -> int:
        return int(model.predict(obs, deterministic=True)[0])

    result = evaluate(gym.make("RLA-TextNav-v0"), agent, 0.0, heldout_seeds(200))
    assert result.success_rate >= 0.9, result


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("n_epochs", 0, "n_epochs must be an integer >= 1, got 0"),
        ("n_steps", 2.5, "n_steps must be an integer >= 1, got 2.5"),
        ("n_envs", True, "n_envs must be an integer >= 1, got True"),
        ("learning_rate", -1e-3, "learning_rate must be a number > 0, got -0.001"),
        ("gamma", 1.5, r"gamma must be a number in \[0, 1\], got 1.5"),
        ("gae_lambda", float("nan"), r"gae_lambda must be a number in \[0, 1\], got nan"),
        ("ent_coef", -0.1, "ent_coef must be a finite number >= 0, got -0.1"),
        ("vf_coef", float("inf"), "vf_coef must be a finite number >= 0, got inf"),
        ("max_grad_norm", float("inf"), "max_grad_norm must be a finite number > 0, got inf"),
        ("max_grad_norm", 0, "max_grad_norm must be a finite number > 0, got 0"),
        ("clip_range", 0, "clip_range must be a number > 0, got 0"),
        ("seed", -1, "seed must be an integer >= 0, got -1"),
        ("seed", 1.5, "seed must be an integer >= 0, got 1.5"),
        ("device", "nonsense", "device must be a torch device available here, got 'nonsense'"),
    ],
)
def test_bad_trainer_settings_are_named(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BatchedPPO("RLA-TextNav-v0", difficulty=0.2, **{"n_envs": 4, field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("steps", [-5, 0, 2.5, True, "64"])
def test_learn_refuses_a_bad_number_of_steps_by_name(steps: object) -> None:
    model = BatchedPPO("RLA-TextNav-v0", difficulty=0.2, n_envs=4)
    message = f"total_timesteps must be an integer >= 1, got {steps!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        model.learn(steps)  # type: ignore[arg-type]
    assert model.num_timesteps == 0 and model._obs is None  # refused before anything ran
