"""What runs while the closed RLAnything loop trains, on any SB3 on-policy algorithm.

rollouts -> PRM votes -> integrated reward -> policy update -> PRM update -> curriculum update.

The pieces are an SB3 ``VecEnvWrapper`` and a callback, so the algorithm itself is untouched
(:func:`agents.loop.build_loop` assembles them from :class:`agents.loop.LoopSettings`):

- :class:`IntegratedRewardVecEnv` replaces each step's reward with integrated feedback. The
  outcome O (+1 / -1) arrives on the last step and lambda * mean_j S_j on every step; in the
  loop the PRM predicts each episode's outcome when it ends and votes on the whole rollout in
  one call at its end, and the callback adds these process rewards to SB3's rollout buffer
  before the update. It also collects the finished trajectories and writes
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
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from agents.curriculum import CurriculumVecEnv, finish_curriculum_rollout
from agents.reward_model import PRMTrainer, ProcessRewardModel, draw_votes, prm_diagnostics
from agents.trajectories import Trajectory
from rla_gym.core import check_difficulty, final_outcome
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


def check_voters(mode: str, prm: ProcessRewardModel | None, lam: float, m: int) -> None:
    """A PRM exactly where ``mode``'s votes come from one, lambda finite and >= 0, m >= 1 votes."""
    flags = MODE_FLAGS[check_mode(mode)]
    if flags.uses_prm and prm is None:
        raise ValueError(f"mode {mode!r} needs a ProcessRewardModel")
    if flags.oracle and prm is not None:
        raise ValueError(f"mode {mode!r} votes with the env's exact labels: pass prm=None")
    if (
        isinstance(lam, bool)
        or not isinstance(lam, (int, float, np.floating, np.integer))
        or not np.isfinite(lam)
        or lam < 0
    ):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


class IntegratedRewardVecEnv(VecEnvWrapper):
    """Rewards = outcome on the last step + lambda * mean of m PRM votes on every step (mode != outcome).

    ``deferred=False``: every vector step's rewards carry their process part, from one PRM call
    per vector step; ``info["rm_step_votes"]`` holds a step's votes and, at an episode's last
    step, ``info["rm_votes"]`` the episode's. ``deferred=True`` (the loop's choice): steps
    return the outcome part only, and :meth:`finish_rollout` hands the rollout's process
    rewards to :class:`RLAnythingCallback`, which adds them to SB3's rollout buffer and
    recomputes the advantages. With a PRM, an episode's last step gets only
    ``info["rm_outcome_prediction"]`` (the value head: V of the final state, one small call
    per vector step in which episodes end; the step head: its steps' mean expected vote), and
    the m votes on every step of the rollout are drawn in one call at its end, by the same PRM
    (it trains after the rollout), kept in :attr:`rollout_votes`; no ``info["rm_votes"]``.
    The oracle modes' votes cost no model call: there each episode is voted on when it ends,
    with ``info["rm_votes"]``.

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
    with the budget (known at reset) in place of T (known only at the end). Deferred or not,
    the rewards have the same distribution (the votes are drawn in another order, from
    :attr:`generator`), and each step is voted on exactly once with m votes.
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
        check_voters(mode, prm, lam, m)
        self.prm, self.lam, self.m, self.deferred = prm, float(lam), m, bool(deferred)
        # a PRM's votes on a deferred rollout are cast at its end (oracle votes cost nothing)
        self._late_votes = self.deferred and prm is not None
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
        self._votes: list[list[np.ndarray]] = [[] for _ in range(n)]  # per env: its scored chunks
        self._estimates: list[list[np.ndarray]] = [[] for _ in range(n)]
        # the rollout so far, one row per vector step: what the voters see, and the process rewards
        self._rollout: dict[str, np.ndarray] = {}
        self._position = 0  # vector steps recorded in self._rollout
        self._unscored_from = np.zeros(n, dtype=np.int64)  # each env's first unscored position
        self._step_votes: np.ndarray | None = None  # deferred=False: the last vector step's votes
        #: Late votes: the last rollout's votes, shape (n_steps, n_envs, m).
        self.rollout_votes: np.ndarray | None = None
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
        labels, gains = [], []
        for i, info in enumerate(infos):
            label = 1 if info.get("progress") == 1 else -1  # for evaluation metrics (and oracle votes)
            gain = 0.0
            if self.flags.votes == "potential":  # gamma * Phi(s') - Phi(s), Phi = -distance, 0 at the end
                after_end = 0.0 if dones[i] else self.gamma * info["distance"]
                gain = float(self._distances[i] - after_end)
                self._distances[i] = info["distance"]
            self._steps[i].append((self._last[i], int(self._actions[i]), after[i], label, gain))
            labels.append(label)
            gains.append(gain)
        if not self.deferred:
            self._position = 0
            self._unscored_from[:] = 0
        self._record(after, labels, gains)
        predictions: dict[int, float] = {}
        if self.scoring and self._late_votes:
            predictions = self._predict_outcomes(done_envs, after)
        elif self.scoring:
            self._score_unscored(done_envs if self.deferred else range(self.num_envs))
        rewards = np.zeros(self.num_envs, np.float32)
        if not self.deferred:
            rewards += self._rollout["process"][0]
        for i in done_envs:
            info = infos[i]
            outcome = final_outcome(info)  # -1 for an episode an outer time limit cut
            rewards[i] += self.outcome_weight * outcome
            # the outcome is final (the step budget is part of the task): SB3 must not add
            # gamma * V(terminal obs) to it as it does for time-limit truncations
            info["TimeLimit.truncated"] = False
            self.finished.append(self._trajectory(i, outcome))
            if self.scoring and self._late_votes:
                info["rm_outcome_prediction"] = predictions[i]  # its votes come at the rollout end
            elif self.scoring:
                info["rm_outcome_prediction"] = self.outcome_prediction(np.concatenate(self._estimates[i]))
                info["rm_votes"] = np.concatenate(self._votes[i])  # (steps, m): the whole episode's votes
            self._steps[i], self._votes[i], self._estimates[i] = [], [], []
            self._start_episode(i, self.venv.reset_infos[i])
        if self.scoring and not self.deferred:
            assert self._step_votes is not None
            for i, info in enumerate(infos):
                info["rm_step_votes"] = self._step_votes[i]
        self._last = np.array(tokens["tokens"], copy=True)
        return obs, rewards, dones, infos

    def _record(self, after: np.ndarray, labels: list[int], gains: list[float]) -> None:
        """Append this vector step to the rollout's arrays (grown by doubling), process part 0."""
        assert self._last is not None and self._actions is not None
        row = {"process": np.zeros(self.num_envs, np.float32)}
        if self.scoring:  # what the voters see, and the weight of the step's process part
            row.update(before=self._last, action=self._actions, after=after, label=np.array(labels),
                       gain=np.array(gains), weight=self._weights.astype(np.float32))  # fmt: skip
        if self.scoring and self._late_votes:
            row["p"] = np.zeros(self.num_envs, np.float32)  # P(vote = +1), filled in when scored
        if not self._rollout or self._position == len(self._rollout["process"]):
            size = max(8, 2 * self._position)
            grown = {k: np.zeros((size, *v.shape), v.dtype) for k, v in row.items()}
            for key, old in self._rollout.items():
                grown[key][: self._position] = old[: self._position]
            self._rollout = grown
        for key, value in row.items():
            self._rollout[key][self._position] = value
        self._position += 1

    def vote(self, rows: list[StepRow]) -> tuple[np.ndarray, list[float]]:
        """m votes per step and the voters' outcome estimate per step, for rows of (obs tokens,
        action, next obs tokens, exact label, fall of the potential), in one call."""
        before, actions, after, labels, gains = (np.array(column) for column in zip(*rows, strict=True))
        votes, estimates = self._vote_arrays(before, actions, after, labels, gains)
        return votes, estimates.tolist()

    def _vote_arrays(
        self, before: np.ndarray, actions: np.ndarray, after: np.ndarray, labels: np.ndarray,
        gains: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """:meth:`vote` on the columns of the rows: votes (steps, m) and estimates (steps,)."""
        if self.prm is None:  # oracle modes: every vote is the step's exact label or progress
            exact = (gains if self.flags.votes == "potential" else labels).astype(np.float32)
            votes = np.repeat(exact[:, None], self.m, axis=1)
            if self.flags.votes == "noisy":  # keep each vote with probability mu / 2
                votes = np.where(self.rng.random(votes.shape) < self.mu / 2, votes, -votes)
            return votes, (votes.mean(axis=1) if self.flags.votes == "noisy" else exact)
        return self.prm.assess_arrays(before, actions, after, self.m, generator=self.generator)

    def outcome_prediction(self, estimates: Sequence[float] | np.ndarray) -> float:
        """The PRM's predicted outcome of an episode from its per-step estimates, in [-1, 1]."""
        last_only = self.prm is not None and self.prm.head == "value"
        values = np.asarray(estimates, dtype=np.float64)
        prediction = values[-1] if last_only else values.mean()
        return float(np.clip(prediction, -1, 1))

    def _unscored_rows(self, envs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The envs among ``envs`` with steps not scored yet, how many each, and those steps'
        rows of the flattened (positions * envs) rollout arrays, grouped by env in step order."""
        envs = np.asarray(list(envs), dtype=np.int64)
        starts = self._unscored_from[envs]
        counts = self._position - starts
        envs, starts, counts = envs[counts > 0], starts[counts > 0], counts[counts > 0]
        env_of = np.repeat(envs, counts)
        first = np.repeat(np.cumsum(counts) - counts, counts)
        position_of = np.arange(len(env_of)) - first + np.repeat(starts, counts)
        return envs, counts, position_of * self.num_envs + env_of

    def _columns(self, flat: np.ndarray, keys: Sequence[str]) -> list[np.ndarray]:
        return [self._rollout[k].reshape(-1, *self._rollout[k].shape[2:]).take(flat, axis=0) for k in keys]

    def _score_unscored(self, envs: Any) -> None:
        """One call for every not yet scored step of ``envs``; fills in their process rewards."""
        envs, counts, flat = self._unscored_rows(envs)
        if not len(flat):
            return
        votes, estimates = self._vote_arrays(
            *self._columns(flat, ("before", "action", "after", "label", "gain"))
        )
        self._rollout["process"].reshape(-1)[flat] = self._rollout["weight"].reshape(-1)[flat] * votes.mean(
            axis=1
        )
        ends = np.cumsum(counts).tolist()
        for i, end, k in zip(envs.tolist(), ends, counts.tolist(), strict=True):
            self._votes[i].append(votes[end - k : end])
            self._estimates[i].append(estimates[end - k : end])
        self._unscored_from[envs] = self._position
        if not self.deferred:  # one row per env, in env order
            self._step_votes = votes

    def _predict_outcomes(self, envs: list[int], after: np.ndarray) -> dict[int, float]:
        """Late votes: the PRM's predicted outcome of each episode that ended in ``envs``."""
        assert self.prm is not None
        if self.prm.head == "value":  # V of the final state: the votes are not needed for it
            values = self.prm.values_array(after[envs]) if envs else np.zeros(0)
            return {i: float(np.clip(v, -1, 1)) for i, v in zip(envs, values, strict=True)}
        self._score_probabilities(envs)  # the step head's prediction is its mean expected vote
        return {i: self.outcome_prediction(np.concatenate(self._estimates[i])) for i in envs}

    def _score_probabilities(self, envs: Any) -> None:
        """Late votes: P(vote = +1) of every not yet scored step of ``envs``, in one call (the
        step head also keeps their estimates for its outcome predictions)."""
        assert self.prm is not None
        envs, counts, flat = self._unscored_rows(envs)
        if not len(flat):
            return
        p, estimates = self.prm.probabilities(*self._columns(flat, ("before", "action", "after")))
        self._rollout["p"].reshape(-1)[flat] = p
        if self.prm.head == "step":
            ends = np.cumsum(counts).tolist()
            for i, end, k in zip(envs.tolist(), ends, counts.tolist(), strict=True):
                self._estimates[i].append(estimates[end - k : end])
        self._unscored_from[envs] = self._position

    def _vote_rollout(self) -> None:
        """Late votes, at the rollout end: m votes on every step of the rollout, in one draw."""
        self._score_probabilities(range(self.num_envs))
        p = self._rollout["p"][: self._position]
        votes = draw_votes(p.reshape(-1), self.m, self.generator).reshape(*p.shape, self.m)
        self._rollout["process"][: self._position] = self._rollout["weight"][: self._position] * votes.mean(
            axis=2
        )
        self.rollout_votes = votes

    def finish_rollout(self) -> np.ndarray:
        """Process rewards (n_steps, n_envs) of the vector steps since the last call (``deferred``).

        With ``process_scale="advantage"`` these are the mean votes, not yet weighted by lambda.
        """
        if not self.deferred:
            raise RuntimeError("finish_rollout() is for deferred=True; rewards already hold the process part")
        if not self._rollout or not self._position:  # no step since the last call (or the reset)
            self._position, self._unscored_from[:] = 0, 0
            return np.zeros((0, self.num_envs), np.float32)
        if self.scoring and self._late_votes:
            self._vote_rollout()
        elif self.scoring:
            self._score_unscored(range(self.num_envs))
        process = np.zeros((0, self.num_envs), np.float32)
        if self._rollout:
            process = self._rollout["process"][: self._position].copy()
        self._position = 0
        self._unscored_from[:] = 0
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
        self._record_rollout(self.reward_env.drain())

    def _record_rollout(self, trajectories: list[Trajectory]) -> None:
        """The rollout's history row (PRM diagnostics and training, curriculum metrics), logged."""
        self._log_row(self._rollout_row(trajectories))

    def _rollout_row(self, trajectories: list[Trajectory]) -> dict[str, float] | None:
        """The PRM's diagnostics and training on the rollout's finished trajectories, and the
        curriculum's metrics, as a history row (None without trajectories); logs nothing."""
        if not trajectories:
            return None
        levels = [t.difficulty for t in trajectories if t.difficulty is not None]
        row = {
            "loop/timesteps": float(self.model.num_timesteps),
            "loop/success": float(np.mean([t.outcome == 1 for t in trajectories])),
            "loop/episodes": len(trajectories),
            "loop/difficulty": float(np.mean(levels)) if levels else float("nan"),
        }
        prm = self.reward_env.prm
        if prm is not None:
            metrics, predictions = prm_diagnostics(prm, trajectories, m=self.reward_env.m, warn=True)
            row.update({f"rm/{k}": v for k, v in metrics.items()})
            errors = error_statistics(predictions, [t.outcome for t in trajectories])
            row.update({f"rm/{k}": errors[k] for k in ("p_over", "p_under", "balance")})
            if self.trainer is not None and self.reward_env.flags.trains_prm:
                self.replay.append(trajectories)
                pooled = [t for rollout in self.replay for t in rollout]
                row["rm/loss"] = self.trainer.update(pooled, epochs=self.prm_epochs)["loss"]
        if self.curriculum is not None:
            row.update({f"curriculum/{k}": float(v) for k, v in self.curriculum.metrics().items()})
        return row

    def _log_row(self, row: dict[str, float] | None) -> None:
        """Record a history row to the logger and keep it (nothing without a row)."""
        if row is None:
            return
        for key, value in row.items():
            self.logger.record(key, value)
        self.history.append(row)
