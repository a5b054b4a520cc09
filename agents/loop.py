"""The closed RLAnything loop on any SB3 on-policy algorithm.

rollouts -> PRM votes -> integrated reward -> policy update -> PRM update -> curriculum update.

The pieces are an SB3 ``VecEnvWrapper`` and a callback, so the algorithm itself is untouched:

- :class:`IntegratedRewardVecEnv` replaces each step's reward with integrated feedback. The
  outcome O (+1 / -1) arrives on the last step and lambda * mean_j S_j on every step, from one
  batched PRM call per vector step. It also collects the finished trajectories and writes
  ``info["rm_outcome_prediction"]`` for the curriculum adapter (``CurriculumVecEnv``) that
  wraps it. With PPO's discounted returns this is the paper's per-step
  R_i = O + (lambda/m) sum_j S_ij in the form a critic-based algorithm can use.
- :class:`RLAnythingCallback` trains the PRM on each rollout's finished trajectories
  (modes ``reward`` and ``env``) and logs the loop's metrics under ``loop/`` and ``rm/``.

Modes (the ablation rows): ``outcome`` (outcome reward only, no PRM), ``policy``
(integrated feedback, frozen PRM, fixed difficulty), ``reward`` (+ PRM training), ``env``
(+ curriculum: the full loop).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from agents.reward_model import PRMTrainer, ProcessRewardModel, evaluate_prm
from agents.trajectories import Trajectory
from rla_gym.curricula.base import Curriculum
from rla_gym.stats import error_statistics

MODES = ("outcome", "policy", "reward", "env")
#: SB3 on-policy algorithms the loop runs on.
ALGOS = ("ppo", "a2c", "maskable-ppo")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


class IntegratedRewardVecEnv(VecEnvWrapper):
    """Rewards = outcome on the last step + lambda * mean of m PRM votes on every step (mode != outcome)."""

    def __init__(
        self,
        venv: VecEnv,
        prm: ProcessRewardModel | None,
        *,
        mode: str = "env",
        lam: float = 1.0,
        m: int = 3,
        seed: int = 0,
    ) -> None:
        super().__init__(venv)
        self.mode = check_mode(mode)
        if mode != "outcome" and prm is None:
            raise ValueError(f"mode {mode!r} needs a ProcessRewardModel")
        if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not np.isfinite(lam) or lam < 0:
            raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"m must be an integer >= 1, got {m!r}")
        self.prm, self.lam, self.m = prm, float(lam), m
        self.generator = torch.Generator(device=prm.device).manual_seed(seed) if prm is not None else None
        self._last: np.ndarray | None = None
        self._actions: np.ndarray | None = None
        self._steps: list[list[tuple[np.ndarray, int, np.ndarray, int]]] = [[] for _ in range(self.num_envs)]
        self._tasks: list[str] = [""] * self.num_envs
        self._difficulties: list[float | None] = [None] * self.num_envs
        self._votes: list[list[np.ndarray]] = [[] for _ in range(self.num_envs)]
        self.finished: list[Trajectory] = []

    def reset(self) -> VecEnvObs:
        obs = self.venv.reset()
        self.reset_infos = self.venv.reset_infos  # SB3's VecEnvWrapper does not pass them on
        tokens: Any = obs
        self._last = np.array(tokens["tokens"], copy=True)
        self._steps = [[] for _ in range(self.num_envs)]
        self._votes = [[] for _ in range(self.num_envs)]
        self._tasks = [info.get("task_id", "") for info in self.venv.reset_infos]
        self._difficulties = [info.get("difficulty") for info in self.venv.reset_infos]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)
        self.venv.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        obs, _, dones, infos = self.venv.step_wait()
        self.reset_infos = self.venv.reset_infos
        assert self._last is not None and self._actions is not None
        tokens: Any = obs  # a dict observation: token ids under "tokens"
        after = np.array(tokens["tokens"], copy=True)
        for j in np.flatnonzero(dones).tolist():
            after[j] = infos[j]["terminal_observation"]["tokens"]
        rewards = np.zeros(self.num_envs, dtype=np.float32)
        if self.prm is not None and self.mode != "outcome":
            steps = {
                "obs": torch.as_tensor(self._last, device=self.prm.device),
                "action": torch.as_tensor(self._actions, device=self.prm.device),
                "next_obs": torch.as_tensor(after, device=self.prm.device),
            }
            votes = self.prm.votes(steps, self.m, generator=self.generator).cpu().numpy()
            rewards += self.lam * votes.mean(axis=1)
            for i, info in enumerate(infos):
                info["rm_step_votes"] = votes[i]
                self._votes[i].append(votes[i])
        for i, info in enumerate(infos):
            label = 1 if info.get("progress") == 1 else -1  # for evaluation metrics only
            self._steps[i].append((self._last[i], int(self._actions[i]), after[i], label))
            if dones[i]:
                rewards[i] += info["outcome"]
                # the outcome is final (the step budget is part of the task): SB3 must not add
                # gamma * V(terminal obs) to it as it does for time-limit truncations
                info["TimeLimit.truncated"] = False
                trajectory = self._trajectory(i, int(info["outcome"]))
                self.finished.append(trajectory)
                if self.prm is not None:
                    info["rm_outcome_prediction"] = float(
                        np.clip(self.prm.predict_outcome(trajectory), -1, 1)
                    )
                if self._votes[i]:
                    info["rm_votes"] = np.stack(self._votes[i])  # (steps, m): the whole episode's votes
                self._steps[i], self._votes[i] = [], []
                self._tasks[i] = self.venv.reset_infos[i].get("task_id", "")
                self._difficulties[i] = self.venv.reset_infos[i].get("difficulty")
        self._last = np.array(tokens["tokens"], copy=True)
        return obs, rewards, dones, infos

    def _trajectory(self, i: int, outcome: int) -> Trajectory:
        before, actions, after, labels = zip(*self._steps[i], strict=True)
        return Trajectory(
            np.stack(before), np.array(actions), np.stack(after), outcome, self._tasks[i], np.array(labels),
            self._difficulties[i],
        )  # fmt: skip

    def drain(self) -> list[Trajectory]:
        """The trajectories finished since the last call."""
        finished, self.finished = self.finished, []
        return finished


class RLAnythingCallback(BaseCallback):
    """Trains the PRM at each rollout end (modes ``reward``, ``env``) and logs the loop's metrics."""

    def __init__(
        self,
        reward_env: IntegratedRewardVecEnv,
        trainer: PRMTrainer | None,
        curriculum: Curriculum | None = None,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        self.reward_env, self.trainer, self.curriculum = reward_env, trainer, curriculum
        self.history: list[dict[str, float]] = []

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        trajectories = self.reward_env.drain()
        if not trajectories:
            return
        row = {
            "loop/success": float(np.mean([t.outcome == 1 for t in trajectories])),
            "loop/episodes": len(trajectories),
        }
        prm = self.reward_env.prm
        if prm is not None:
            metrics = evaluate_prm(prm, trajectories, m=self.reward_env.m, warn=True)
            row.update({f"rm/{k}": v for k, v in metrics.items()})
            errors = error_statistics(prm.predict_outcomes(trajectories), [t.outcome for t in trajectories])
            row.update({f"rm/{k}": errors[k] for k in ("p_over", "p_under", "balance")})
            if self.trainer is not None and self.reward_env.mode in ("reward", "env"):
                row["rm/loss"] = self.trainer.update(trajectories)["loss"]
        if self.curriculum is not None:
            row.update({f"curriculum/{k}": float(v) for k, v in self.curriculum.metrics().items()})
        for key, value in row.items():
            self.logger.record(key, value)
        self.history.append(row)


@dataclasses.dataclass
class LoopSettings:
    """One closed-loop run (``rla train`` will be generated from these fields)."""

    env: str = "RLA-TextNav-v0"
    algo: str = "ppo"
    mode: str = "env"
    curriculum: str = "task-pool"
    objective: str = "value-difference"
    lam: float = 1.0
    m: int = 3
    n_envs: int = 4
    n_steps: int = 256
    difficulty: float = 0.2
    seed: int = 0
    device: str = "auto"


def validate_settings(settings: LoopSettings) -> None:
    """Raise a clear error for any bad setting, before anything is built or written."""
    import gymnasium as gym

    from agents.reward_model import OUTCOME_OBJECTIVES
    from rla_gym.core import RLAEnv, check_difficulty
    from rla_gym.curricula import CURRICULA

    check_mode(settings.mode)
    if settings.algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got {settings.algo!r}")
    if settings.curriculum not in CURRICULA:
        raise ValueError(f"curriculum must be one of {sorted(CURRICULA)}, got {settings.curriculum!r}")
    if settings.objective not in OUTCOME_OBJECTIVES:
        raise ValueError(
            f"objective must be one of {OUTCOME_OBJECTIVES} (outcome-only), got {settings.objective!r}"
        )
    if isinstance(settings.lam, bool) or not np.isfinite(settings.lam) or settings.lam < 0:
        raise ValueError(f"lam must be a finite number >= 0, got {settings.lam!r}")
    for name in ("m", "n_envs", "n_steps"):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    check_difficulty(settings.difficulty)
    if settings.objective.startswith("consistency") and settings.m < 2:
        raise ValueError(f"objective {settings.objective!r} needs m >= 2 votes, got {settings.m}")
    if settings.algo != "a2c" and settings.n_steps * settings.n_envs < 2:
        raise ValueError(
            f"n_steps * n_envs must be >= 2 for {settings.algo}'s minibatches, got {settings.n_steps}"
        )
    try:
        device = torch.device(settings.device) if settings.device != "auto" else None
    except RuntimeError as error:
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {settings.device!r}") from error
    if device is not None and device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {settings.device!r} asked for, but CUDA is not available here")
    env = gym.make(settings.env)  # an unknown id raises gymnasium's NameNotFound
    if not isinstance(env.unwrapped, RLAEnv):
        raise ValueError(f"{settings.env!r} is not an rla-gym environment")


def _algorithm(settings: LoopSettings, venv: VecEnv) -> Any:
    from stable_baselines3 import A2C, PPO

    from agents.policies import MaskableTokenPolicy, TokenPolicy

    common: dict[str, Any] = {"n_steps": settings.n_steps, "seed": settings.seed, "device": settings.device}
    if settings.algo == "a2c":
        return A2C(TokenPolicy, venv, **common)
    if settings.algo == "maskable-ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO(MaskableTokenPolicy, venv, batch_size=settings.n_steps, **common)
    return PPO(TokenPolicy, venv, batch_size=settings.n_steps, **common)


def build_loop(settings: LoopSettings) -> tuple[Any, RLAnythingCallback]:
    """An SB3 on-policy algorithm (``algo``: PPO, A2C or MaskablePPO) on the stack the mode asks for.

    Stack: ``make_vec_env`` -> :class:`IntegratedRewardVecEnv` -> ``CurriculumVecEnv``
    (mode ``env``; other modes train at the fixed ``difficulty``).
    """
    from stable_baselines3.common.env_util import make_vec_env

    from agents.curriculum import CurriculumVecEnv
    from rla_gym.curricula import CURRICULA, FixedCurriculum

    validate_settings(settings)
    venv = make_vec_env(f"rla_gym:{settings.env}", n_envs=settings.n_envs, seed=settings.seed)
    prm = None
    if settings.mode != "outcome":
        head = "value" if settings.objective == "value-difference" else "step"
        prm = ProcessRewardModel.for_env(venv.envs[0], head=head, device=settings.device, seed=settings.seed)  # type: ignore[attr-defined]
    reward_env = IntegratedRewardVecEnv(
        venv, prm, mode=settings.mode, lam=settings.lam, m=settings.m, seed=settings.seed
    )
    if settings.mode == "env" and settings.curriculum != "fixed":
        # PLR's default score needs value estimates, which the adapter does not have: use RM error
        extra = {"score": "rm_error"} if settings.curriculum == "plr" else {}
        curriculum: Curriculum = CURRICULA[settings.curriculum](settings.env, seed=settings.seed, **extra)
    else:  # the ablation rows below the full loop keep the difficulty fixed
        curriculum = FixedCurriculum(settings.env, settings.difficulty, seed=settings.seed)
    top = CurriculumVecEnv(reward_env, curriculum)
    model = _algorithm(settings, top)
    trainer = None
    if prm is not None and settings.mode in ("reward", "env"):
        trainer = PRMTrainer(prm, settings.objective, lam=settings.lam, m=settings.m, seed=settings.seed)
    return model, RLAnythingCallback(reward_env, trainer, curriculum)
