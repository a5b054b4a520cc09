"""The paper's trainer: group rollouts, per-step-index z-scored advantages, no critic.

Each round draws ``groups`` tasks from the curriculum (``Curriculum.next_group``) and runs
``group_size`` rollouts of each, side by side, every env stepping until its own episode ends.
Step i of trajectory tau gets the integrated reward R_i = O + (lambda / m) sum_j S_ij (the
outcome alone in mode ``outcome``); within a group, R_i is z-scored across the trajectories
that reach step index i (population std; a step index only one trajectory reaches keeps its
raw R, as the authors' OSWorld code does; a zero std gives 0). That z-score is the step's
advantage in a PPO-style clipped surrogate with a k3 KL penalty against the policy before the
update, and no critic and no value loss (REFERENCE.md A1). Samples with advantage 0 are
dropped, as in the authors' code. ``group_filter="mixed"`` drops groups whose rollouts all
succeed or all fail (the ALFWorld code); ``"all"`` keeps every group (the OSWorld code).
A round is held back until the curriculum has seen its outcomes, so the rollouts of a
task-pool proposal that the round's judgement rejects are not trained on, as in the paper
(``Curriculum.verdict``; with ``group_size == rollouts_per_task`` a group is one round of a
pool slot, which the loop arranges).

:class:`GroupPPO` is an SB3 ``OnPolicyAlgorithm``, so it takes the same policies
(``TokenPolicy``, ``MaskableTokenPolicy``: the value head is there but never trained), the same
callbacks, ``predict``, checkpoints and evaluation as the PPO loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from agents.fields import check_finite
from agents.history import TokenHistory, action_base, check_frames, history_space
from agents.trajectories import Trajectory
from rla_gym.curricula.base import Curriculum, EpisodeResult
from rla_gym.stats import group_advantages
from rla_gym.vector import RLAVectorEnv

GROUP_FILTERS = ("all", "mixed")
__all__ = ["GROUP_FILTERS", "GroupPPO", "group_advantages", "keeps_group"]


def keeps_group(outcomes: Sequence[int], group_filter: str) -> bool:
    """Whether a group with these outcomes trains the policy under ``group_filter``."""
    if group_filter not in GROUP_FILTERS:
        raise ValueError(f"group_filter must be one of {GROUP_FILTERS}, got {group_filter!r}")
    return group_filter == "all" or len(set(outcomes)) > 1


class GroupPPO(OnPolicyAlgorithm):
    """GRPO-style trainer on an SB3 policy (see the module doc).

    ``env`` must be a ``DummyVecEnv`` or an ``agents.vec_env.BatchedVecEnv`` of
    ``groups * group_size`` rla-gym envs (anything with their ``envs``): the trainer steps each
    env on its own, so a finished episode waits for its group instead of running
    on. ``reward_env`` (an ``agents.loop_runtime.IntegratedRewardVecEnv`` over the same envs, never
    stepped) supplies the mode, lambda, m and the votes; the finished trajectories go to its
    ``finished`` list, where the loop's callback trains the PRM on them. One rollout of SB3's
    ``learn`` is one round.

    ``history`` k > 0 gives the policy memory as ``agents.history.HistoryVecEnv`` does: it sees
    the last k observations and actions of its episode (``agents.history.history_space``); the
    PRM and the curriculum see the env's own observations.
    """

    def __init__(
        self,
        policy: Any,
        env: VecEnv,
        *,
        reward_env: Any,
        curriculum: Curriculum,
        group_size: int = 8,
        group_filter: str = "all",
        learning_rate: float = 3e-4,
        n_epochs: int = 10,
        batch_size: int = 256,
        clip_range: float = 0.2,
        kl_coef: float = 0.01,
        ent_coef: float = 0.0,
        max_grad_norm: float = 0.5,
        masked: bool = False,
        history: int = 0,
        policy_kwargs: dict[str, Any] | None = None,
        seed: int | None = None,
        device: torch.device | str = "auto",
        verbose: int = 0,
    ) -> None:
        if not isinstance(getattr(env, "envs", None), list):
            raise TypeError(
                f"GroupPPO steps its envs one by one: env must be a DummyVecEnv or BatchedVecEnv, got {env!r}"
            )
        for name, value in (("group_size", group_size), ("n_epochs", n_epochs), ("batch_size", batch_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if group_size < 2:
            raise ValueError(f"group_size must be >= 2 to z-score across a group, got {group_size}")
        if env.num_envs % group_size:
            raise ValueError(
                f"the env count ({env.num_envs}) must be a multiple of group_size ({group_size})"
            )
        keeps_group([1], group_filter)  # validates the name
        check_finite("clip_range", clip_range, positive=True)
        check_finite("max_grad_norm", max_grad_norm, positive=True)
        check_finite("kl_coef", kl_coef, positive=False)
        check_finite("ent_coef", ent_coef, positive=False)
        if not isinstance(masked, bool):
            raise TypeError(f"masked must be a bool, got {masked!r}")
        if not isinstance(curriculum, Curriculum):
            raise TypeError(f"curriculum must be an rla_gym Curriculum, got {curriculum!r}")
        if reward_env is None or not hasattr(reward_env, "finished"):
            raise TypeError(f"reward_env must be the loop's IntegratedRewardVecEnv, got {reward_env!r}")
        if curriculum.needs_values:
            raise ValueError(
                f"{type(curriculum).__name__} needs a critic's value estimates (needs_values), which the "
                "group trainer has not; give it a score without values (PLR: score='external', the "
                "trainer's mean positive group advantage) or train with PPO"
            )
        self.history = 0 if history == 0 else check_frames(history)
        self._memory: TokenHistory | None = None
        super().__init__(
            policy, env, learning_rate=learning_rate, n_steps=1, gamma=1.0, gae_lambda=1.0, ent_coef=ent_coef,
            vf_coef=0.0, max_grad_norm=max_grad_norm, use_sde=False, sde_sample_freq=-1,
            policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device,
            supported_action_spaces=(spaces.Discrete,), _init_setup_model=False,
        )  # fmt: skip
        if self.history:
            self.observation_space = history_space(self.observation_space, self.action_space, self.history)
        self._setup_model()
        self.reward_env, self.curriculum = reward_env, curriculum
        self.group_size, self.group_filter = group_size, group_filter
        self.groups = env.num_envs // group_size
        self.n_epochs, self.batch_size = n_epochs, batch_size
        self.clip_range_value, self.kl_coef, self.masked = clip_range, kl_coef, masked
        self._samples: dict[str, Any] | None = None
        self.round_stats: dict[str, float] = {}

    def _setup_model(self) -> None:
        """The policy only: samples live in the trainer, not in an SB3 rollout buffer."""
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        self.rollout_buffer = None  # type: ignore[assignment]
        self.policy = self.policy_class(  # type: ignore[assignment]
            self.observation_space, self.action_space, self.lr_schedule, **self.policy_kwargs
        )
        self.policy = self.policy.to(self.device)

    # ------------------------------------------------------------ collection
    def _start_memory(self, tokens: np.ndarray) -> None:
        """With a history: every env of the round begins its episode seeing its row of ``tokens``."""
        if self.history:
            raw = self.env.observation_space["tokens"]  # type: ignore[index, union-attr]
            self._memory = TokenHistory(
                len(tokens), length=tokens.shape[1], frames=self.history, action_base=action_base(raw)
            )
            self._memory.start(np.ones(len(tokens), dtype=bool), tokens)

    def _policy_view(self, batch: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
        """What the policy sees of envs ``rows`` (observations ``batch``): with a history, its tokens."""
        if self._memory is None:
            return batch
        return {**batch, "tokens": self._memory.tokens(rows)}

    def _remember(self, rows: np.ndarray, tokens: Any, actions: np.ndarray) -> None:
        """Envs ``rows`` took ``actions`` and now see ``tokens`` (one row each)."""
        if self._memory is not None:
            self._memory.push(np.stack(tokens), actions, rows)

    def _act_batch(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Sampled actions and their log-probabilities for a batch of observations (arrays)."""
        with torch.no_grad():
            obs_tensor, _ = self.policy.obs_to_tensor(batch)
            if self.masked:
                mask = batch["action_mask"].astype(bool)
                actions, _, log_probs = self.policy(obs_tensor, action_masks=mask)
            else:
                actions, _, log_probs = self.policy(obs_tensor)
        return actions.cpu().numpy(), log_probs.cpu().numpy()

    def _excluded_save_params(self) -> list[str]:
        """SB3's, and the loop's objects passed in (the reward env wraps the vec env; the
        curriculum has its own ``state_dict``): ``save`` writes the policy and its settings."""
        return [*super()._excluded_save_params(), "reward_env", "curriculum", "_memory", "_samples"]

    def collect_rollouts(
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: Any, n_rollout_steps: int
    ) -> bool:
        """One round: ``groups`` tasks, ``group_size`` rollouts each, then the group advantages."""
        self.policy.set_training_mode(False)
        callback.on_rollout_start()
        tasks = [task for g in range(self.groups) for task in self.curriculum.next_group(g, self.group_size)]
        trains = [self.curriculum.trains_on(task) for task in tasks]
        vector = getattr(env, "vector", None)
        if isinstance(vector, RLAVectorEnv):
            rollouts = self._run_batched(vector, tasks, callback)
        else:
            rollouts = self._run_each(env.envs, tasks, callback)  # type: ignore[attr-defined]
        if rollouts is None:  # a callback stopped the round: its tasks go back unreported
            for task in tasks:
                self.curriculum.abandon(task)
            return False
        steps, outcomes, returns = rollouts
        self._finish_round(tasks, trains, steps, outcomes, returns)
        for key, value in self.round_stats.items():  # in this round's log row (train's come a row later)
            self.logger.record(f"grpo/{key}", value)
        callback.on_rollout_end()
        return True

    def _run_each(
        self, envs: list[Any], tasks: list[Any], callback: BaseCallback
    ) -> tuple[list[list[Any]], np.ndarray, np.ndarray] | None:
        """The round's rollouts, each env stepped on its own (a ``DummyVecEnv``'s envs)."""
        obs: list[Any] = []
        distances = np.zeros(len(tasks))
        for i, task in enumerate(tasks):
            envs[i].unwrapped.set_task(task)
            first, info = envs[i].reset()
            if info["task_key"] != task.key:
                raise RuntimeError(f"env {i} ran task key {info['task_key']}, not the assigned {task}")
            obs.append(first)
            distances[i] = info.get("distance", 0.0)
        self._start_memory(np.stack([o["tokens"] for o in obs]))
        # per env: (obs, action, log_prob, next tokens, label, gain, what the policy saw)
        steps: list[list[Any]] = [[] for _ in tasks]
        outcomes = np.zeros(len(tasks), dtype=np.int64)
        returns = np.zeros(len(tasks))
        active = list(range(len(tasks)))
        gamma = self.reward_env.gamma
        while active:
            rows = np.array(active)
            batch = {key: np.stack([obs[i][key] for i in active]) for key in obs[active[0]]}
            seen = self._policy_view(batch, rows)
            actions, log_probs = self._act_batch(seen)
            still, nexts = [], []
            # this step as SB3's callbacks read it, over every env (those that waited: nothing)
            step_dones = np.zeros(len(tasks), dtype=bool)
            step_rewards = np.zeros(len(tasks), dtype=np.float32)
            step_infos: list[dict[str, Any]] = [{} for _ in tasks]
            for k, (i, action, log_prob) in enumerate(zip(active, actions, log_probs, strict=True)):
                nxt, reward, terminated, truncated, info = envs[i].step(int(action))
                done = terminated or truncated
                step_dones[i], step_rewards[i], step_infos[i] = done, reward, info
                after = 0.0 if done else gamma * info.get("distance", 0.0)
                gain, distances[i] = float(distances[i] - after), info.get("distance", 0.0)
                label = 1 if info.get("progress") == 1 else -1
                view = obs[i] if self._memory is None else {key: value[k] for key, value in seen.items()}
                steps[i].append((obs[i], int(action), float(log_prob), nxt["tokens"], label, gain, view))
                nexts.append(nxt["tokens"])
                returns[i] += float(reward)
                obs[i] = nxt
                if done:
                    outcomes[i] = int(info["outcome"])
                    if "episode" in info:
                        self.ep_info_buffer.extend([info["episode"]])  # type: ignore[union-attr]
                    self.ep_success_buffer.append(bool(info["is_success"]))  # type: ignore[union-attr]
                else:
                    still.append(i)
            self._remember(rows, nexts, actions)
            self.num_timesteps += len(active)
            active = still
            sb3 = {"dones": step_dones, "rewards": step_rewards, "infos": step_infos, "new_obs": obs}
            callback.update_locals({**locals(), **sb3})
            if not callback.on_step():
                return None
        return steps, outcomes, returns

    def _run_batched(
        self, vector: RLAVectorEnv, tasks: list[Any], callback: BaseCallback
    ) -> tuple[list[list[Any]], np.ndarray, np.ndarray] | None:
        """The round's rollouts on a batched vector env: one call steps every sub-env.

        The same rollouts as :meth:`_run_each` (same tasks, same policy batches in the same
        order). For the round the vector env runs with autoreset DISABLED, so a sub-env whose
        episode has ended waits, unstepped, for the others."""
        mode = vector.metadata["autoreset_mode"]
        vector.metadata["autoreset_mode"] = AutoresetMode.DISABLED
        try:
            return self._run_batched_round(vector, tasks, callback)
        finally:
            vector.metadata["autoreset_mode"] = mode

    def _run_batched_round(
        self, vector: RLAVectorEnv, tasks: list[Any], callback: BaseCallback
    ) -> tuple[list[list[Any]], np.ndarray, np.ndarray] | None:
        n = len(tasks)
        vector.set_tasks(tasks)
        obs, info = vector.reset()
        keys = np.array([task.key for task in tasks], dtype=np.int64)
        if not np.array_equal(info["task_key"], keys):
            wrong = int(np.flatnonzero(info["task_key"] != keys)[0])
            ran = info["task_key"][wrong]
            raise RuntimeError(f"env {wrong} ran task key {ran}, not the assigned {tasks[wrong]}")
        distances = info["distance"].astype(np.float64)
        self._start_memory(obs["tokens"])
        # per env: (obs, action, log_prob, next tokens, label, gain, what the policy saw)
        steps: list[list[Any]] = [[] for _ in tasks]
        outcomes = np.zeros(n, dtype=np.int64)
        returns = np.zeros(n)
        running = np.ones(n, dtype=bool)
        noop = vector.envs[0].noop_action
        gamma = self.reward_env.gamma
        while running.any():
            active = np.flatnonzero(running)
            tokens, masks = obs["tokens"][active], obs["action_mask"][active]
            seen = self._policy_view({"tokens": tokens, "action_mask": masks}, active)
            chosen, log_probs = self._act_batch(seen)
            actions = np.full(n, noop, dtype=np.int64)
            actions[active] = chosen
            obs, rewards, terminated, truncated, info = vector.step(actions)
            done = (terminated | truncated)[active]
            distance = info["distance"][active].astype(np.float64)
            gains = distances[active] - np.where(done, 0.0, gamma * distance)
            distances[active] = distance
            labels = np.where(info["progress"][active] == 1, 1, -1)
            next_tokens = obs["tokens"][active]
            self._remember(active, next_tokens, chosen)
            for k, i in enumerate(active.tolist()):
                row = {"tokens": tokens[k], "action_mask": masks[k]}
                view = row if self._memory is None else {"tokens": seen["tokens"][k], "action_mask": masks[k]}
                steps[i].append((row, int(chosen[k]), float(log_probs[k]), next_tokens[k], int(labels[k]),
                                 float(gains[k]), view))  # fmt: skip
            returns[active] += rewards[active]
            finished = active[done]
            outcomes[finished] = info["outcome"][finished]
            self.ep_success_buffer.extend(info["is_success"][finished].tolist())  # type: ignore[union-attr]
            self.ep_info_buffer.extend(  # type: ignore[union-attr]  # Monitor's, as on the DummyVecEnv path
                {"r": float(returns[i]), "l": len(steps[i])} for i in finished.tolist()
            )
            running[finished] = False
            self.num_timesteps += active.size
            stepped = np.zeros(n, dtype=bool)
            stepped[active] = True
            callback.update_locals({  # SB3's names over every sub-env (those that waited: nothing)
                **locals(), "dones": (terminated | truncated) & stepped, "new_obs": obs, "vector_info": info,
                "rewards": np.where(stepped, rewards, 0.0),
            })  # fmt: skip
            if not callback.on_step():
                return None
        return steps, outcomes, returns

    def _finish_round(
        self,
        tasks: list[Any],
        trains: list[bool],
        steps: list[list[Any]],
        outcomes: np.ndarray,
        returns: np.ndarray,
    ) -> None:
        """Votes for every step of the round in one call, group advantages, curriculum updates."""
        re = self.reward_env
        rows = [(s[0]["tokens"], s[1], s[3], s[4], s[5]) for episode in steps for s in episode]
        votes = estimates = None
        if re.scoring:
            votes, estimates = re.vote(rows)
        rewards, offset = [], 0
        for i, episode in enumerate(steps):
            outcome = re.outcome_weight * outcomes[i]
            process = 0.0
            if votes is not None:
                process = re.lam * votes[offset : offset + len(episode)].mean(axis=1)
            rewards.append(outcome + process + np.zeros(len(episode)))
            offset += len(episode)
        k = self.group_size
        advantages = [a for g in range(self.groups) for a in group_advantages(rewards[g * k : (g + 1) * k])]
        offset = 0
        for i, episode in enumerate(steps):
            trajectory = Trajectory(
                np.stack([s[0]["tokens"] for s in episode]), np.array([s[1] for s in episode]),
                np.stack([s[3] for s in episode]), int(outcomes[i]), tasks[i].task_id,
                np.array([s[4] for s in episode]), tasks[i].difficulty,
            )  # fmt: skip
            re.finished.append(trajectory)
            prediction = None
            if estimates is not None:
                prediction = re.outcome_prediction(estimates[offset : offset + len(episode)])
            self.curriculum.update(
                EpisodeResult(
                    tasks[i], int(outcomes[i]), float(returns[i]), len(episode),
                    rm_outcome_prediction=prediction,
                    rm_votes=None if votes is None else votes[offset : offset + len(episode)],
                    # the positive value loss with the group mean for a critic (PLR's score here)
                    score=float(np.maximum(advantages[i], 0.0).mean()),
                )
            )  # fmt: skip
            offset += len(episode)
        rejected = 0
        for g in range(self.groups):  # the paper trains on a proposal's rollouts only if it is accepted
            if self.curriculum.verdict(tasks[g * self.group_size]) is False:
                rejected += 1
                trains[g * self.group_size : (g + 1) * self.group_size] = [False] * self.group_size
        keep_obs, keep_actions, keep_log_probs, keep_advantages = [], [], [], []
        kept_groups = 0
        for g in range(self.groups):
            members = range(g * k, (g + 1) * k)
            if not keeps_group([outcomes[i] for i in members], self.group_filter):
                continue
            kept_groups += 1
            for i in members:
                if not trains[i]:
                    continue
                for step, advantage in zip(steps[i], advantages[i], strict=True):
                    if advantage != 0:
                        keep_obs.append(step[6])
                        keep_actions.append(step[1])
                        keep_log_probs.append(step[2])
                        keep_advantages.append(advantage)
        total = sum(len(episode) for episode in steps)
        self.round_stats = {
            "success": float(np.mean(outcomes == 1)),
            "kept_groups": kept_groups / self.groups,
            "rejected_groups": rejected / self.groups,
            "trained_share": len(keep_actions) / max(total, 1),
        }
        self._samples = None
        if keep_actions:
            self._samples = {
                "obs": {key: np.stack([o[key] for o in keep_obs]) for key in keep_obs[0]},
                "actions": np.array(keep_actions),
                "log_probs": np.array(keep_log_probs, dtype=np.float32),
                "advantages": np.array(keep_advantages, dtype=np.float32),
            }

    # ------------------------------------------------------------ update
    def train(self) -> None:
        """Clipped surrogate on the round's samples; k3 KL to the pre-update policy; no critic."""
        samples, self._samples = self._samples, None
        if samples is None:
            self.logger.record("grpo/samples", 0)
            return
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        n = len(samples["actions"])
        obs_tensor, _ = self.policy.obs_to_tensor(samples["obs"])
        actions = torch.as_tensor(samples["actions"], device=self.device)
        old_log_probs = torch.as_tensor(samples["log_probs"], device=self.device)
        advantages = torch.as_tensor(samples["advantages"], device=self.device)
        masks = samples["obs"]["action_mask"].astype(bool) if self.masked else None
        losses, kls, clipped = [], [], []
        for _ in range(self.n_epochs):
            order = torch.randperm(n, device=self.device)
            for start in range(0, n, self.batch_size):
                idx = order[start : start + self.batch_size]
                batch_obs = {key: value[idx] for key, value in obs_tensor.items()}  # type: ignore[union-attr]
                if self.masked:
                    assert masks is not None
                    _, log_prob, entropy = self.policy.evaluate_actions(  # type: ignore[call-arg]
                        batch_obs, actions[idx], action_masks=masks[idx.cpu().numpy()]
                    )
                else:
                    _, log_prob, entropy = self.policy.evaluate_actions(batch_obs, actions[idx])
                log_ratio = (log_prob - old_log_probs[idx]).clamp(-10.0, 10.0)
                ratio = torch.exp(log_ratio)
                adv = advantages[idx]
                surrogate = torch.min(
                    ratio * adv, ratio.clamp(1 - self.clip_range_value, 1 + self.clip_range_value) * adv
                )
                kl = torch.exp(-log_ratio) + log_ratio - 1.0  # k3 estimate of KL(new || old)
                loss = -surrogate.mean() + self.kl_coef * kl.mean()
                if self.ent_coef and entropy is not None:
                    loss = loss - self.ent_coef * entropy.mean()
                self.policy.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
                losses.append(loss.item())
                kls.append(kl.mean().item())
                clipped.append(((ratio - 1).abs() > self.clip_range_value).float().mean().item())
        self._n_updates += self.n_epochs
        self.logger.record("grpo/samples", n)
        self.logger.record("train/policy_loss", float(np.mean(losses)))
        self.logger.record("train/kl_k3", float(np.mean(kls)))
        self.logger.record("train/clip_fraction", float(np.mean(clipped)))
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        """SB3's ``predict``; with a maskable policy it takes ``action_masks`` as MaskablePPO does."""
        if self.masked:
            return self.policy.predict(  # type: ignore[call-arg]
                observation, state, episode_start, deterministic, action_masks=action_masks
            )
        return self.policy.predict(observation, state, episode_start, deterministic)
