"""PPO in one loop over a batched rla-gym vector env, CleanRL-style: Outcome-only, or the closed loop.

SB3's PPO with the same settings and policy (``agents.loop``, ``algo="ppo"``,
``vec_env="batched"``, mode ``outcome``) spends most of its time around the network: per-env
info dicts, wrappers, the rollout buffer's dict copies, a distribution object per call. This
loop keeps the rollout in tensors and steps ``gym.make_vec``'s array-state env directly. Same
algorithm: GAE, advantages normalised per minibatch, the clipped surrogate, an unclipped value
loss, gradients clipped to ``max_grad_norm``; the reward is the outcome at an episode's end
(+1 success, -1 failure, as the loop's Outcome-only rows), never bootstrapped past it. The
policy is :class:`agents.policies.TokenPolicy` with its own initialisation and Adam.

The closed loop's modes (``mode`` other than ``"outcome"``) add
:class:`agents.batched_loop.FeedbackVectorWrapper` around the env: the m votes on every step
of a rollout are drawn in one call at its end (by a PRM, or from the exact labels in the oracle
modes) and their process part joins the rewards before GAE (``process_scale`` ``"step"`` or
``"episode"``) or the advantages after it (``"advantage"``), as in ``agents.loop_runtime``.
A ``curriculum`` (the full loop, mode ``"env"``) picks every sub-env's tasks through
:class:`rla_gym.wrappers.vector.CurriculumVectorWrapper`, outermost, and reads the PRM's
predicted outcomes; steps of episodes it does not train on (``Curriculum.trains_on``) stay out
of the update. :class:`agents.batched_loop.BatchedLoopCallback` trains the PRM at each rollout's end.

``rla train`` and ``rla bench`` run it as ``--algo batched-ppo`` (``agents.loop.build_loop``):
``learn`` calls SB3 callbacks as SB3's on-policy algorithms do (``on_rollout_start``, ``on_step``
after each vector step, ``on_rollout_end`` before the update), records to an SB3 ``Logger``, and
:class:`RolloutOutcomeCallback` keeps the loop's history rows. A checkpoint holds the policy,
its optimizer, the step counter and :attr:`BatchedPPO.generator` (and, in the closed loop's
modes, the PRM, its optimizer and the curriculum: ``agents.train``); the vector env's state is not
saved, so a resumed run continues from them with fresh episodes (seeded ``seed + num_timesteps``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.logger import Logger

import rla_gym  # noqa: F401  (registers the env ids)
from agents.batched_loop import FeedbackVectorWrapper
from agents.fields import check_finite
from agents.loop_runtime import MODE_FLAGS, check_mode, zscore
from agents.policies import TokenPolicy
from agents.reward_model import ProcessRewardModel, resolve_device
from rla_gym.curricula.base import Curriculum
from rla_gym.wrappers.vector import CurriculumVectorWrapper


def generalized_advantages(
    rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, gamma: float, gae_lambda: float
) -> torch.Tensor:
    """GAE(lambda) advantages, (steps, envs), as SB3's rollout buffer computes them.

    ``values`` has one row more than ``rewards``: the value of the observation after the last
    step. ``dones[t]`` marks an episode that ended at step ``t`` (nothing is bootstrapped past it).
    """
    if rewards.shape != dones.shape or values.shape != (len(rewards) + 1, *rewards.shape[1:]):
        raise ValueError(
            f"rewards and dones must have one shape and values one row more, got {tuple(rewards.shape)}, "
            f"{tuple(dones.shape)} and {tuple(values.shape)}"
        )
    advantages = torch.empty_like(rewards)
    last = torch.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        going = 1.0 - dones[t]
        delta = rewards[t] + gamma * values[t + 1] * going - values[t]
        last = delta + gamma * gae_lambda * going * last
        advantages[t] = last
    return advantages


def _check_device(device: str | torch.device) -> torch.device:
    """``device`` resolved as the PRM's (``"auto"``: CUDA when available), and usable here; a
    ValueError naming it otherwise (not torch's error from deep inside the first tensor)."""
    try:
        resolved = resolve_device(device)
        torch.empty(0, device=resolved)
    except (RuntimeError, TypeError, AssertionError) as error:
        raise ValueError(f"device must be a torch device available here, got {device!r} ({error})") from None
    return resolved


class BatchedPPO:
    """PPO on ``gym.make_vec(env_id, n_envs)``'s array-state env at a fixed ``difficulty`` (or the
    ``curriculum``'s tasks), Outcome-only or with the closed loop's feedback (``mode``, ``prm``).

    ``predict`` is the policy's (an SB3 policy), so ``agents.train.evaluate_policy`` takes it.
    ``learn`` takes SB3 callbacks and ``reset_num_timesteps`` as SB3's ``learn`` does (a new count
    starts new episodes). A callback's ``on_step`` finds SB3's ``new_obs``, ``actions``, ``rewards``
    (the outcome part; the closed loop's process part joins at the rollout's end) and ``dones``
    in ``self.locals``, as arrays over the sub-envs, and the step's Gymnasium info (a dict of
    arrays) as ``vector_info``: SB3's list ``infos`` is not built.

    Examples:
        >>> import rla_gym
        >>> model = BatchedPPO("RLA-TextNav-v0", difficulty=0.1, n_envs=8, n_steps=4, batch_size=16)
        >>> model.learn(64).num_timesteps
        64
    """

    def __init__(
        self, env_id: str, *, difficulty: float, n_envs: int = 256, n_steps: int = 4, batch_size: int = 512,
        n_epochs: int = 4, learning_rate: float = 1e-3, gamma: float = 0.99, gae_lambda: float = 0.95,
        clip_range: float = 0.2, ent_coef: float = 0.0, vf_coef: float = 0.5, max_grad_norm: float = 0.5,
        encoder: str = "flatten-small", seed: int = 0, device: str = "cpu", mode: str = "outcome",
        prm: ProcessRewardModel | None = None, lam: float = 1.0, m: int = 3, process_scale: str = "step",
        mu: float = 1.5, curriculum: Curriculum | None = None,
    ) -> None:  # fmt: skip
        for name, value in (("n_envs", n_envs), ("n_steps", n_steps), ("batch_size", batch_size),
                            ("n_epochs", n_epochs)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if n_envs * n_steps < 2 or batch_size < 2:
            raise ValueError(
                f"n_envs * n_steps and batch_size must be >= 2, got {n_envs * n_steps}, {batch_size}"
            )
        for name, number in (("learning_rate", learning_rate), ("clip_range", clip_range)):
            if isinstance(number, bool) or not isinstance(number, (int, float)) or not number > 0:
                raise ValueError(f"{name} must be a number > 0, got {number!r}")
        for name, number in (("gamma", gamma), ("gae_lambda", gae_lambda)):
            if isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 <= number <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {number!r}")
        check_finite("ent_coef", ent_coef, positive=False)
        check_finite("vf_coef", vf_coef, positive=False)
        check_finite("max_grad_norm", max_grad_norm, positive=True)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
        resolved = _check_device(device)
        if curriculum is not None and not isinstance(curriculum, Curriculum):
            raise TypeError(f"curriculum must be an rla_gym Curriculum or None, got {curriculum!r}")
        if curriculum is not None and curriculum.needs_values:
            raise ValueError(
                f"curriculum {type(curriculum).__name__} scores episodes with the learner's value "
                "estimates (needs_values): not on the batched path (use the SB3 algorithms)"
            )
        self.mode = check_mode(mode)
        # no info["oracle_mask"], the costliest key: nothing here reads it
        self.envs = gym.make_vec(
            env_id, num_envs=n_envs, vectorization_mode="vector_entry_point",
            autoreset_mode=AutoresetMode.SAME_STEP, difficulty=difficulty, oracle_info=False,
        )  # fmt: skip
        #: The closed loop's feedback around the env (None in mode ``outcome``).
        self.feedback: FeedbackVectorWrapper | None = None
        stack: Any = self.envs
        if MODE_FLAGS[mode].votes != "none":
            stack = self.feedback = FeedbackVectorWrapper(
                stack, prm, mode=mode, lam=lam, m=m, process_scale=process_scale, mu=mu, seed=seed
            )
        elif prm is not None:
            raise ValueError("mode 'outcome' casts no votes: pass prm=None")
        #: The curriculum adapter, outermost (None without a curriculum).
        self.curriculum_env = None if curriculum is None else CurriculumVectorWrapper(stack, curriculum)
        self._stack: Any = stack if self.curriculum_env is None else self.curriculum_env
        self.n_envs, self.n_steps, self.batch_size, self.n_epochs = n_envs, n_steps, batch_size, n_epochs
        space = self.envs.single_observation_space
        tokens = space["tokens"] if isinstance(space, gym.spaces.Dict) and "tokens" in space.spaces else None
        if not isinstance(tokens, gym.spaces.Box) or len(tokens.shape) != 1:
            raise TypeError(f"{env_id!r} has no 1-D Box of token ids under 'tokens': {space!r}")
        self._length = tokens.shape[0]
        self.gamma, self.gae_lambda, self.clip_range = gamma, gae_lambda, clip_range
        self.ent_coef, self.vf_coef, self.max_grad_norm = ent_coef, vf_coef, max_grad_norm
        self.difficulty, self.seed, self.device = difficulty, seed, resolved
        torch.manual_seed(seed)
        self.policy = TokenPolicy(
            self.envs.single_observation_space, self.envs.single_action_space, lambda _: learning_rate,
            features_extractor_kwargs={"encoder": encoder},
            # SB3's Adam (eps 1e-5) as one fused kernel: the same update, a few % of the run faster
            optimizer_kwargs={"eps": 1e-5, "fused": self.device.type in ("cpu", "cuda")},
        ).to(self.device)  # fmt: skip
        self.generator = torch.Generator(self.device).manual_seed(seed)
        self.num_timesteps, self._n_updates = 0, 0
        #: outcomes (1 success, -1 failure) of the last 100 finished training episodes
        self.outcomes: deque[int] = deque(maxlen=100)
        #: outcomes of the episodes that finished in the last rollout
        self.rollout_outcomes = np.zeros(0, dtype=np.int64)
        self._obs: dict[str, np.ndarray] | None = None
        self._logger = Logger(folder=None, output_formats=[])
        self._beside: list[tuple[Future[Any], Callable[[Any], None]]] = []
        self._worker: ThreadPoolExecutor | None = None

    @property
    def logger(self) -> Logger:
        """The SB3 logger ``learn`` records to (no outputs until :meth:`set_logger`)."""
        return self._logger

    def set_logger(self, logger: Logger) -> None:
        """Record to ``logger`` from now on (SB3's ``set_logger``)."""
        self._logger = logger

    def get_env(self) -> None:
        """No SB3 ``VecEnv``: callbacks that need ``training_env`` do not apply."""
        return None

    def predict(self, observation: Any, deterministic: bool = False, **kwargs: Any) -> Any:
        """The policy's ``predict`` (SB3's signature)."""
        return self.policy.predict(observation, deterministic=deterministic, **kwargs)

    def beside_update(self, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        """Run ``work()`` in a worker thread while this rollout's policy update runs (a callback's
        ``on_rollout_end`` asks); ``done(result)`` follows in the learner's thread once both have
        finished, before the iteration's log is written and the next rollout starts.

        ``work`` must not touch the policy, its optimizer or the env (the closed loop's PRM
        training and diagnostics, which touch only the PRM); torch releases the GIL in its
        kernels, so with a second core the two overlap. An exception in ``work`` is raised in
        the learner's thread once the update is done (run one after the other, it would come
        before the update). When ``learn`` ends in an error, work already started is finished
        and ``done`` still called where it succeeded, so the PRM's training and the loop's
        rows stay in step.
        """
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="beside-update")
        self._beside.append((self._worker.submit(work), done))

    def _settle(self, *, raising: bool = True) -> None:
        """Wait for the work started by :meth:`beside_update` and hand each result to its ``done``;
        with ``raising=False`` (``learn`` is raising already) work that failed is passed over."""
        pending, self._beside = self._beside, []
        for future, done in pending:
            if raising or future.exception() is None:
                done(future.result())

    def _heads(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Action log-probabilities and values of a batch of token rows."""
        policy = self.policy
        latent_pi, latent_vf = policy.mlp_extractor(policy.features_extractor({"tokens": tokens}))
        return policy.action_net(latent_pi).log_softmax(-1), policy.value_net(latent_vf).squeeze(-1)

    def learn(
        self, total_timesteps: int, callback: BaseCallback | list[BaseCallback] | None = None,
        reset_num_timesteps: bool = True,
    ) -> BatchedPPO:  # fmt: skip
        """Collect ``n_envs x n_steps`` steps, update, until ``total_timesteps`` steps (more
        steps with ``reset_num_timesteps=False``); a callback's ``on_step`` returning False stops
        before the rollout's update, as in SB3."""
        if (
            isinstance(total_timesteps, bool)
            or not isinstance(total_timesteps, (int, np.integer))
            or total_timesteps < 1
        ):
            raise ValueError(f"total_timesteps must be an integer >= 1, got {total_timesteps!r}")
        total_timesteps = int(total_timesteps)
        if reset_num_timesteps:
            self.num_timesteps = 0
        if self._obs is None:  # a new or a resumed run
            self._obs, _ = self._stack.reset(seed=self.seed + self.num_timesteps)
        elif reset_num_timesteps:  # a new count starts new episodes, as SB3's (no reseeding)
            self._obs, _ = self._stack.reset()
        hooks = CallbackList(callback if isinstance(callback, list) else [callback] if callback else [])
        hooks.init_callback(self)  # type: ignore[arg-type]  # SB3 types it as its own algorithm
        target, start, iterations = self.num_timesteps + total_timesteps, time.perf_counter(), 0
        first = self.num_timesteps  # fps counts this call's steps, as SB3's
        hooks.on_training_start(locals(), globals())
        try:
            while self.num_timesteps < target:
                hooks.on_rollout_start()
                rollout = self._collect(hooks)
                if rollout is None:
                    break
                hooks.on_rollout_end()
                self.policy.set_training_mode(True)
                self._update(*rollout)
                self._settle()
                iterations += 1
                self._log_iteration(iterations, start, first)
        finally:
            if self._worker is not None:  # nothing left running after learn (an error included)
                self._worker.shutdown(wait=True)
                self._worker = None
                self._settle(raising=False)  # work still pending here: learn is raising
        hooks.on_training_end()
        return self

    def _log_iteration(self, iterations: int, start: float, first: int) -> None:
        """The iteration's ``time/`` keys (fps: steps since ``learn`` began at ``first`` steps, per
        second since ``start``), then the logger's dump (SB3's rows)."""
        self.logger.record("time/iterations", iterations)
        fps = (self.num_timesteps - first) / max(time.perf_counter() - start, 1e-9)
        self.logger.record("time/fps", int(fps))
        self.logger.record("time/total_timesteps", self.num_timesteps)
        self.logger.dump(step=self.num_timesteps)

    def _collect(self, hooks: CallbackList) -> tuple[torch.Tensor, ...] | None:
        """One rollout: tokens, actions, old log-probabilities, advantages, returns (flat); None
        when a callback stopped it."""
        shape = (self.n_steps, self.n_envs)
        tokens = torch.empty((*shape, self._length), dtype=torch.long)
        actions, rewards = torch.empty(shape, dtype=torch.long), torch.empty(shape)
        log_probs, dones = torch.empty(shape), torch.empty(shape)
        values = torch.empty((shape[0] + 1, shape[1]))
        adapter = self.curriculum_env  # its sub-envs' running episodes: trained on or not
        trained = torch.ones(shape, dtype=torch.bool)
        outcome_weight = MODE_FLAGS[self.mode].outcome_weight
        assert self._obs is not None
        obs, finished = self._obs, []
        self.policy.set_training_mode(False)
        complete = False  # a rollout a callback stops, or an error cuts, leaves no recorded votes
        try:
            with torch.no_grad():
                for t in range(self.n_steps):
                    tokens[t] = torch.from_numpy(obs["tokens"])
                    if adapter is not None:
                        trained[t] = torch.from_numpy(adapter.training)
                    log_p, values[t] = self._heads(tokens[t].to(self.device))
                    action = torch.multinomial(log_p.exp(), 1, generator=self.generator)
                    log_probs[t] = log_p.gather(1, action).squeeze(1).cpu()
                    actions[t] = action.squeeze(1).cpu()
                    obs, _, terminated, truncated, info = self._stack.step(actions[t].numpy())
                    outcome = terminated.astype(np.float32) - truncated.astype(np.float32)
                    step_rewards, step_dones = outcome_weight * outcome, terminated | truncated
                    rewards[t], dones[t] = torch.from_numpy(step_rewards), torch.from_numpy(step_dones)
                    finished.append(outcome[outcome != 0].astype(np.int64))
                    self.outcomes.extend(finished[-1].tolist())
                    self._obs, self.num_timesteps = obs, self.num_timesteps + self.n_envs
                    hooks.update_locals({  # SB3's names, as arrays over the sub-envs
                        "new_obs": obs, "actions": actions[t].numpy(), "rewards": step_rewards,
                        "dones": step_dones, "vector_info": info,
                    })  # fmt: skip
                    if not hooks.on_step():
                        break
                else:
                    self.rollout_outcomes = np.concatenate(finished)
                    values[-1] = self._heads(torch.from_numpy(obs["tokens"]).to(self.device))[1].cpu()
                    complete = True
        finally:
            if not complete and self.feedback is not None:  # the next rollout starts afresh
                self.feedback.discard_rollout()  # (the episodes running go on)
        if not complete:
            return None
        feedback, process = self.feedback, None
        if feedback is not None:  # the closed loop's process part: votes on the whole rollout, now
            process = feedback.finish_rollout()
            if feedback.process_scale != "advantage":
                rewards += torch.from_numpy(process)
        advantages = generalized_advantages(rewards, values, dones, self.gamma, self.gae_lambda)
        returns = advantages + values[:-1]
        if feedback is not None and process is not None and feedback.process_scale == "advantage":
            # A_t = GAE(outcome rewards)_t + lambda * z(mean vote)_t; the critic keeps the outcome's returns
            advantages += feedback.lam * torch.from_numpy(zscore(process)).float()
        flat = [tokens.flatten(0, 1), *(x.flatten() for x in (actions, log_probs, advantages, returns))]
        if adapter is not None:  # the curriculum's informing-only episodes stay out of the update
            self.logger.record("loop/trained_share", float(trained.float().mean()))
            if not bool(trained.all()):
                keep = trained.flatten()
                flat = [x[keep] for x in flat]
        return tuple(flat)

    def _update(
        self, tokens: torch.Tensor, actions: torch.Tensor, old_log_probs: torch.Tensor,
        advantages: torch.Tensor, returns: torch.Tensor,
    ) -> None:  # fmt: skip
        """``n_epochs`` passes of minibatch updates over one rollout (none when it is empty)."""
        if not len(actions):
            return
        on = [x.to(self.device) for x in (tokens, actions, old_log_probs, advantages, returns)]
        optimizer, parameters = self.policy.optimizer, list(self.policy.parameters())
        losses = torch.zeros(3, device=self.device)  # policy, value, clipped share (summed)
        for _ in range(self.n_epochs):
            order = torch.randperm(len(actions), generator=self.generator, device=self.device)
            for start in range(0, len(actions), self.batch_size):
                tok, act, old, adv, ret = (x[order[start : start + self.batch_size]] for x in on)
                log_p, value = self._heads(tok)
                if len(adv) > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = torch.exp(log_p.gather(1, act[:, None]).squeeze(1) - old)
                clipped = torch.clamp(ratio, 1 - self.clip_range, 1 + self.clip_range)
                policy_loss = -torch.min(adv * ratio, adv * clipped).mean()
                value_loss = torch.nn.functional.mse_loss(ret, value)
                loss = policy_loss + self.vf_coef * value_loss
                if self.ent_coef:
                    loss = loss + self.ent_coef * (log_p.exp() * log_p).sum(-1).mean()
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, self.max_grad_norm)
                optimizer.step()
                clip_share = ((ratio - 1).abs() > self.clip_range).float().mean()
                losses += torch.stack([policy_loss, value_loss, clip_share]).detach()
        self._n_updates += self.n_epochs
        minibatches = self.n_epochs * -(-len(actions) // self.batch_size)
        for key, value in zip(
            ("policy_gradient_loss", "value_loss", "clip_fraction"), losses.tolist(), strict=True
        ):
            self.logger.record(f"train/{key}", value / minibatches)
        self.logger.record("train/n_updates", self._n_updates)


class RolloutOutcomeCallback(BaseCallback):
    """The loop's history for :class:`BatchedPPO`: a row per rollout in which episodes finished,
    with the keys of ``agents.loop_runtime.RLAnythingCallback``'s Outcome-only rows
    (``loop/timesteps``, ``loop/success``, ``loop/episodes``, ``loop/difficulty``), also logged."""

    model: Any

    def __init__(self, difficulty: float) -> None:
        super().__init__()
        self.difficulty = difficulty
        self.history: list[dict[str, float]] = []

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        outcomes = self.model.rollout_outcomes
        if not len(outcomes):
            return
        row = {
            "loop/timesteps": float(self.model.num_timesteps),
            "loop/success": float(np.mean(outcomes == 1)),
            "loop/episodes": len(outcomes),
            "loop/difficulty": float(self.difficulty),
        }
        for key, value in row.items():
            self.logger.record(key, value)
        self.history.append(row)
