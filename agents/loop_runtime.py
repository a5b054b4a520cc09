"""What runs while the closed RLAnything loop trains, on any SB3 on-policy algorithm.

rollouts -> PRM votes -> integrated reward -> policy update -> PRM update -> curriculum update.

The pieces are an SB3 ``VecEnvWrapper`` and a callback, so the algorithm itself is untouched
(:func:`agents.loop.build_loop` assembles them from :class:`agents.loop.LoopSettings`):

- :class:`IntegratedRewardVecEnv` replaces each step's reward with integrated feedback. The
  outcome O (+1 / -1) arrives on the last step and lambda * mean_j S_j on every step; in the
  loop the PRM scores each episode in one call when it ends and the rest of the rollout in one
  call at its end, and the callback adds these process rewards to SB3's rollout buffer before
  the update. It also collects the finished trajectories and writes
  ``info["rm_outcome_prediction"]`` for the curriculum adapter (``CurriculumVecEnv``) that
  wraps it. With PPO's discounted returns this is the paper's per-step
  R_i = O + (lambda/m) sum_j S_ij in the form a critic-based algorithm can use.
- :class:`RLAnythingCallback` trains the PRM on each rollout's finished trajectories
  (modes ``reward`` and ``env``) and logs the loop's metrics under ``loop/`` and ``rm/``.

Modes (the ablation rows): ``outcome`` (outcome reward only, no PRM), ``policy``
(integrated feedback, frozen PRM, fixed difficulty), ``reward`` (+ PRM training), ``env``
(+ curriculum: the full loop), and ``rm-only`` (the PRM trained as in ``reward``, but the
policy's reward is the process part alone, no outcome: the paper's "RM signals beat
human-label outcomes" experiment). ``oracle`` is not part of the method: integrated feedback
whose votes are the exact step labels, at a fixed difficulty, the ceiling of what a better
PRM could give. ``noisy-oracle`` (not the method: a PRM of controlled quality) draws each
vote from the exact step label, kept with probability mu / 2 and flipped otherwise, so that
mu = p+ + p- is the given ``mu`` (1: no signal, 2: the oracle). ``oracle-potential`` (not
the method either) is potential-based shaping at full strength, F = lambda * (gamma * Phi(s')
- Phi(s)) with Phi = -(optimal distance) and Phi = 0 after the last step: its discounted sum
over an episode is lambda * (start distance) whatever the agent does, so it cannot be farmed
as the binary votes can.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any, cast

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from agents.curriculum import CurriculumVecEnv, finish_curriculum_rollout
from agents.reward_model import PRMTrainer, ProcessRewardModel, evaluate_prm
from agents.trajectories import Trajectory
from rla_gym.core import check_difficulty
from rla_gym.curricula.base import Curriculum
from rla_gym.stats import error_statistics


@dataclasses.dataclass(frozen=True)
class ModeFlags:
    """What an ablation row switches on.

    ``votes``: who votes on each step: ``"none"``, ``"prm"`` (a learned PRM), or the env's
    oracle: ``"exact"`` (the step's label), ``"noisy"`` (the label, flipped with probability
    1 - mu / 2) or ``"potential"`` (potential-based shaping from the exact distance).
    ``trains_prm``: the PRM trains on the rollouts; ``adapts_env``: the curriculum picks the
    tasks (other rows keep ``--difficulty`` fixed); ``outcome_weight``: 1 when the outcome
    reaches the policy, 0 when only the votes do.
    """

    votes: str
    trains_prm: bool = False
    adapts_env: bool = False
    outcome_weight: float = 1.0

    @property
    def uses_prm(self) -> bool:
        return self.votes == "prm"

    @property
    def oracle(self) -> bool:
        """The votes come from the env's exact labels or distance, not from a PRM."""
        return self.votes in ("exact", "noisy", "potential")


#: The loop's modes (the ablation rows) and what each switches on.
MODE_FLAGS: dict[str, ModeFlags] = {
    "outcome": ModeFlags("none"),
    "policy": ModeFlags("prm"),
    "reward": ModeFlags("prm", trains_prm=True),
    "env": ModeFlags("prm", trains_prm=True, adapts_env=True),
    "rm-only": ModeFlags("prm", trains_prm=True, outcome_weight=0.0),
    "oracle": ModeFlags("exact"),
    "noisy-oracle": ModeFlags("noisy"),
    "oracle-potential": ModeFlags("potential"),
}
MODES = tuple(MODE_FLAGS)
#: Modes whose votes come from the env's exact labels, not from a PRM.
ORACLE_MODES = tuple(mode for mode, flags in MODE_FLAGS.items() if flags.oracle)
#: How the process part reaches the learner: lambda * mean vote added to every step's reward
#: ("step", the return-summing form), that divided by the episode's step budget ("episode"),
#: or lambda * z(mean vote) added to PPO's advantage, z over the rollout ("advantage").
PROCESS_SCALES = ("step", "episode", "advantage")
#: One step as the voters see it: obs tokens, action, next obs tokens, exact label, fall of the potential.
StepRow = tuple[np.ndarray, int, np.ndarray, int, float]
#: Discount of the loop's algorithms (SB3's default), also the potential-based shaping's gamma.
GAMMA = 0.99
#: Modes whose PRM is trained on the rollouts.
TRAINED_RM_MODES = tuple(mode for mode, flags in MODE_FLAGS.items() if flags.trains_prm)


def check_mu(mu: float) -> float:
    """Vote quality of mode ``noisy-oracle``: mu = p+ + p- in [0, 2]."""
    if isinstance(mu, bool) or not isinstance(mu, (int, float)) or not 0.0 <= mu <= 2.0:
        raise ValueError(f"mu must be a number in [0, 2] (p+ + p-), got {mu!r}")
    return float(mu)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


class IntegratedRewardVecEnv(VecEnvWrapper):
    """Rewards = outcome on the last step + lambda * mean of m PRM votes on every step (mode != outcome).

    ``deferred=False``: every vector step's rewards carry their process part, from one PRM call
    per vector step. ``deferred=True`` (the loop's choice): steps return the outcome part only;
    the PRM scores an episode's steps in one call when it ends (that call also gives
    ``rm_outcome_prediction``) and the unfinished rest in one call per rollout, when
    :meth:`finish_rollout` hands the rollout's process rewards to :class:`RLAnythingCallback`,
    which adds them to SB3's rollout buffer and recomputes the advantages.

    ``process_scale="step"`` puts the paper's R_i = O + lambda * mean_j S_ij on every step as
    the reward: the return-summing form, not the paper's (the paper z-scores R_i per step index
    across a group and uses it as the advantage, see ``agents.grpo``). With a critic and
    discounted returns the process part adds up over the episode (about T * lambda / 3 for a
    typical vote mix) and drowns the single outcome. ``"advantage"`` is the faithful analogue
    for a critic: the rewards carry the outcome only, and :class:`RLAnythingCallback` adds
    lambda * z(mean_j S_tj), z over the rollout's steps, to GAE's advantages (deferred only;
    :meth:`finish_rollout` then returns the mean votes). ``"episode"`` divides
    it by the episode's step budget B, so an episode's process rewards sum to at most
    lambda * T / B <= lambda: the per-trajectory form O + (lambda / T) sum_t s_t,
    with the budget (known at reset) in place of T (known only at the end). The rewards have the
    same distribution (the votes are drawn in another order), with several times fewer PRM
    calls. Either way each step is voted on exactly once.
    """

    def __init__(
        self,
        venv: VecEnv,
        prm: ProcessRewardModel | None,
        *,
        mode: str = "env",
        lam: float = 1.0,
        m: int = 3,
        seed: int = 0,
        deferred: bool = False,
        process_scale: str = "step",
        mu: float = 1.5,
        gamma: float = GAMMA,
    ) -> None:
        super().__init__(venv)
        self.mode = check_mode(mode)
        self.flags = MODE_FLAGS[mode]
        if process_scale not in PROCESS_SCALES:
            raise ValueError(f"process_scale must be one of {PROCESS_SCALES}, got {process_scale!r}")
        if process_scale == "advantage" and not deferred:
            raise ValueError(
                "process_scale='advantage' needs deferred=True: the callback adds it to the advantages"
            )
        self.process_scale = process_scale
        self.mu = check_mu(mu)
        self.gamma = check_difficulty(gamma, "gamma")
        self.rng = np.random.default_rng(seed)  # noisy-oracle's vote flips
        if self.flags.uses_prm and prm is None:
            raise ValueError(f"mode {mode!r} needs a ProcessRewardModel")
        if self.flags.oracle and prm is not None:
            raise ValueError(f"mode {mode!r} votes with the env's exact labels: pass prm=None")
        if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not np.isfinite(lam) or lam < 0:
            raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"m must be an integer >= 1, got {m!r}")
        self.prm, self.lam, self.m, self.deferred = prm, float(lam), m, bool(deferred)
        self.scoring = self.flags.votes != "none"
        self.outcome_weight = self.flags.outcome_weight
        self.generator = torch.Generator(device=prm.device).manual_seed(seed) if prm is not None else None
        self._last: np.ndarray | None = None
        self._actions: np.ndarray | None = None
        self.finished: list[Trajectory] = []
        self._clear_episodes()

    def _clear_episodes(self) -> None:
        n = self.num_envs
        # per step: obs tokens, action, next obs tokens, exact label, fall of the optimal distance
        self._steps: list[list[StepRow]] = [[] for _ in range(n)]
        self._votes: list[list[np.ndarray]] = [[] for _ in range(n)]
        self._estimates: list[list[float]] = [[] for _ in range(n)]
        self._unscored: list[list[int]] = [[] for _ in range(n)]  # rollout positions of unscored steps
        self._process: list[np.ndarray] = []  # per vector step of the rollout: lambda * mean vote
        self._last_votes: dict[int, np.ndarray] = {}
        self._tasks: list[str] = [""] * n
        self._difficulties: list[float | None] = [None] * n
        self._distances = np.zeros(n)  # exact optimal distance before each env's next step
        self._weights = np.full(n, self.lam)  # lambda (or lambda / step budget, or 1) per running episode

    def reset(self) -> VecEnvObs:
        obs = self.venv.reset()
        self.reset_infos = self.venv.reset_infos  # SB3's VecEnvWrapper does not pass them on
        tokens: Any = obs
        self._last = np.array(tokens["tokens"], copy=True)
        self._clear_episodes()
        self._tasks = [str(info.get("task_key", "")) for info in self.venv.reset_infos]
        self._difficulties = [info.get("difficulty") for info in self.venv.reset_infos]
        for i, info in enumerate(self.venv.reset_infos):
            self._start_episode(i, info)
        return obs

    def _start_episode(self, i: int, info: dict[str, Any]) -> None:
        if self.flags.votes == "potential":
            if "distance" not in info:
                raise ValueError("mode 'oracle-potential' needs info['distance'] (an rla-gym env)")
            self._distances[i] = info["distance"]
        self._tasks[i] = str(info.get("task_key", ""))
        self._difficulties[i] = info.get("difficulty")
        if self.flags.votes == "potential":  # shaping at full strength, whatever the scale
            self._weights[i] = self.lam
        elif self.process_scale == "advantage":  # the callback weights the z-scores by lambda
            self._weights[i] = 1.0
        elif self.process_scale == "episode":
            if "step_budget" not in info:
                raise ValueError(
                    "process_scale='episode' needs info['step_budget'] at reset (an rla-gym env)"
                )
            self._weights[i] = self.lam / info["step_budget"]

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)
        self.venv.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        obs, _, dones, infos = self.venv.step_wait()
        self.reset_infos = self.venv.reset_infos
        assert self._last is not None and self._actions is not None
        tokens: Any = obs  # a dict observation: token ids under "tokens"
        after = np.array(tokens["tokens"], copy=True)
        done_envs = np.flatnonzero(dones).tolist()
        for j in done_envs:
            after[j] = infos[j]["terminal_observation"]["tokens"]
        if not self.deferred:
            self._process = []
        position = len(self._process)
        self._process.append(np.zeros(self.num_envs, dtype=np.float32))
        for i, info in enumerate(infos):
            label = 1 if info.get("progress") == 1 else -1  # for evaluation metrics (and oracle votes)
            gain = 0.0
            if self.flags.votes == "potential":  # gamma * Phi(s') - Phi(s), Phi = -distance, 0 at the end
                after_end = 0.0 if dones[i] else self.gamma * info["distance"]
                gain = float(self._distances[i] - after_end)
                self._distances[i] = info["distance"]
            self._steps[i].append((self._last[i], int(self._actions[i]), after[i], label, gain))
            if self.scoring:
                self._unscored[i].append(position)
        if self.scoring:
            self._score_unscored(done_envs if self.deferred else range(self.num_envs))
        rewards = np.zeros(self.num_envs, dtype=np.float32) if self.deferred else self._process[-1].copy()
        for i in done_envs:
            info = infos[i]
            rewards[i] += self.outcome_weight * info["outcome"]
            # the outcome is final (the step budget is part of the task): SB3 must not add
            # gamma * V(terminal obs) to it as it does for time-limit truncations
            info["TimeLimit.truncated"] = False
            self.finished.append(self._trajectory(i, int(info["outcome"])))
            if self.scoring:
                info["rm_outcome_prediction"] = self.outcome_prediction(self._estimates[i])
                info["rm_votes"] = np.stack(self._votes[i])  # (steps, m): the whole episode's votes
            self._steps[i], self._votes[i], self._estimates[i] = [], [], []
            self._start_episode(i, self.venv.reset_infos[i])
        if self.scoring and not self.deferred:
            for i, info in enumerate(infos):
                info["rm_step_votes"] = self._last_votes[i]
        self._last = np.array(tokens["tokens"], copy=True)
        return obs, rewards, dones, infos

    def vote(self, rows: list[StepRow]) -> tuple[np.ndarray, list[float]]:
        """m votes per step and the PRM's outcome estimate per step, for rows of (obs tokens,
        action, next obs tokens, exact label, fall of the potential), in one call."""
        if self.prm is None:  # oracle modes: every vote is the step's exact label or progress
            exact = np.array([r[4] if self.flags.votes == "potential" else r[3] for r in rows], np.float32)
            votes = np.repeat(exact[:, None], self.m, axis=1)
            if self.flags.votes == "noisy":  # keep each vote with probability mu / 2
                votes = np.where(self.rng.random(votes.shape) < self.mu / 2, votes, -votes)
            return votes, (votes.mean(axis=1) if self.flags.votes == "noisy" else exact).tolist()
        device = self.prm.device
        steps = {
            "obs": torch.as_tensor(np.stack([r[0] for r in rows]), device=device),
            "action": torch.as_tensor(np.array([r[1] for r in rows]), device=device),
            "next_obs": torch.as_tensor(np.stack([r[2] for r in rows]), device=device),
        }
        votes_t, _, estimates_t = self.prm.assess(steps, self.m, generator=self.generator)
        return votes_t.cpu().numpy(), estimates_t.cpu().tolist()

    def outcome_prediction(self, estimates: list[float]) -> float:
        """The PRM's predicted outcome of an episode from its per-step estimates, in [-1, 1]."""
        last_only = self.prm is not None and self.prm.head == "value"
        prediction = estimates[-1] if last_only else sum(estimates) / len(estimates)
        return float(np.clip(prediction, -1, 1))

    def _score_unscored(self, envs: Any) -> None:
        """One PRM call for every not yet scored step of ``envs``; fills the process rewards."""
        jobs = [(i, len(self._unscored[i])) for i in envs if self._unscored[i]]
        if not jobs:
            return
        rows = [step for i, k in jobs for step in self._steps[i][-k:]]
        votes, estimates = self.vote(rows)
        means = votes.mean(axis=1)
        offset = 0
        for i, k in jobs:
            for position, value in zip(self._unscored[i], means[offset : offset + k], strict=True):
                self._process[position][i] = self._weights[i] * value
            self._votes[i].extend(votes[offset : offset + k])
            self._estimates[i].extend(estimates[offset : offset + k])
            self._last_votes[i] = votes[offset + k - 1]
            self._unscored[i] = []
            offset += k

    def finish_rollout(self) -> np.ndarray:
        """Process rewards (n_steps, n_envs) of the vector steps since the last call (``deferred``).

        With ``process_scale="advantage"`` these are the mean votes, not yet weighted by lambda.
        """
        if not self.deferred:
            raise RuntimeError("finish_rollout() is for deferred=True; rewards already hold the process part")
        if self.scoring:
            self._score_unscored(range(self.num_envs))
        process = np.stack(self._process) if self._process else np.zeros((0, self.num_envs), np.float32)
        self._process = []
        return process

    def _trajectory(self, i: int, outcome: int) -> Trajectory:
        before, actions, after, labels, _ = zip(*self._steps[i], strict=True)
        return Trajectory(
            np.stack(before), np.array(actions), np.stack(after), outcome, self._tasks[i], np.array(labels),
            self._difficulties[i],
        )  # fmt: skip

    def drain(self) -> list[Trajectory]:
        """The trajectories finished since the last call."""
        finished, self.finished = self.finished, []
        return finished


def zscore(values: np.ndarray) -> np.ndarray:
    """(values - mean) / std over all entries (population std); zeros where the std is 0."""
    values = np.asarray(values, dtype=np.float64)
    std = values.std()
    return np.zeros_like(values) if std == 0 else (values - values.mean()) / std


class RLAnythingCallback(BaseCallback):
    """Trains the PRM at each rollout end (modes ``reward``, ``env``, ``rm-only``) and logs metrics.

    The PRM trains for ``prm_epochs`` passes over the finished trajectories of the last
    ``prm_replay`` rollouts; the paper's setting is one pass over this rollout's (1, 1).
    """

    def __init__(
        self,
        reward_env: IntegratedRewardVecEnv,
        trainer: PRMTrainer | None,
        curriculum: Curriculum | None = None,
        verbose: int = 0,
        *,
        prm_epochs: int = 1,
        prm_replay: int = 1,
        curriculum_env: CurriculumVecEnv | None = None,
    ) -> None:
        super().__init__(verbose)
        self.curriculum_env = curriculum_env
        for name, value in (("prm_epochs", prm_epochs), ("prm_replay", prm_replay)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.reward_env, self.trainer, self.curriculum = reward_env, trainer, curriculum
        self.prm_epochs = prm_epochs
        #: The finished trajectories of the last ``prm_replay`` rollouts, oldest first.
        self.replay: deque[list[Trajectory]] = deque(maxlen=prm_replay)
        self.history: list[dict[str, float]] = []

    def _on_step(self) -> bool:
        return True

    def _add_process_rewards(self) -> None:
        """Deferred scoring: add the rollout's process rewards to SB3's buffer, then redo GAE.

        With ``process_scale="advantage"`` the process part goes to the advantages instead.

        SB3 computes returns and advantages just before ``on_rollout_end``, from the rewards the
        env returned (outcome only); recomputing them from the full rewards is exact. The last
        value V(s_T) is recomputed from ``_last_obs``: sb3-contrib's MaskablePPO does not
        refresh the callback's ``locals`` after computing it, so ``locals["values"]`` would be
        V(s_{T-1}) there.
        """
        process = self.reward_env.finish_rollout()
        if not self.reward_env.scoring:
            return
        buffer = cast(OnPolicyAlgorithm, self.model).rollout_buffer
        if process.shape != buffer.rewards.shape:
            raise RuntimeError(
                f"rollout of shape {process.shape} does not match SB3's buffer {buffer.rewards.shape}"
            )
        if self.reward_env.process_scale == "advantage" and self.reward_env.flags.votes != "potential":
            # A_t = GAE(outcome rewards)_t + lambda * z(mean vote)_t; the critic keeps the outcome's returns
            buffer.advantages += self.reward_env.lam * zscore(process)
            return
        buffer.rewards += process
        model = cast(OnPolicyAlgorithm, self.model)
        with torch.no_grad():
            last_values = model.policy.predict_values(obs_as_tensor(model._last_obs, model.device))  # type: ignore[arg-type]
        assert model._last_episode_starts is not None
        buffer.compute_returns_and_advantage(last_values=last_values, dones=model._last_episode_starts)

    def _on_rollout_end(self) -> None:
        if self.reward_env.deferred:
            self._add_process_rewards()
        if self.curriculum_env is not None:
            finish_curriculum_rollout(cast(OnPolicyAlgorithm, self.model), self.curriculum_env, self.logger)
        trajectories = self.reward_env.drain()
        if not trajectories:
            return
        levels = [t.difficulty for t in trajectories if t.difficulty is not None]
        row = {
            "loop/timesteps": float(self.model.num_timesteps),
            "loop/success": float(np.mean([t.outcome == 1 for t in trajectories])),
            "loop/episodes": len(trajectories),
            "loop/difficulty": float(np.mean(levels)) if levels else float("nan"),
        }
        prm = self.reward_env.prm
        if prm is not None:
            metrics = evaluate_prm(prm, trajectories, m=self.reward_env.m, warn=True)
            row.update({f"rm/{k}": v for k, v in metrics.items()})
            errors = error_statistics(prm.predict_outcomes(trajectories), [t.outcome for t in trajectories])
            row.update({f"rm/{k}": errors[k] for k in ("p_over", "p_under", "balance")})
            if self.trainer is not None and self.reward_env.flags.trains_prm:
                self.replay.append(trajectories)
                pooled = [t for rollout in self.replay for t in rollout]
                row["rm/loss"] = self.trainer.update(pooled, epochs=self.prm_epochs)["loss"]
        if self.curriculum is not None:
            row.update({f"curriculum/{k}": float(v) for k, v in self.curriculum.metrics().items()})
        for key, value in row.items():
            self.logger.record(key, value)
        self.history.append(row)
