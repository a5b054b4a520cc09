"""PPO in one loop over a batched rla-gym vector env: Outcome-only at a fixed difficulty, CleanRL-style.

SB3's PPO with the same settings and policy (``agents.loop``, ``algo="ppo"``,
``vec_env="batched"``, mode ``outcome``) spends most of its time around the network: per-env
info dicts, wrappers, the rollout buffer's dict copies, a distribution object per call. This
loop keeps the rollout in tensors and steps ``gym.make_vec``'s array-state env directly. Same
algorithm: GAE, advantages normalised per minibatch, the clipped surrogate, an unclipped value
loss, gradients clipped to ``max_grad_norm``; the reward is the outcome at an episode's end
(+1 success, -1 failure, as the loop's Outcome-only rows), never bootstrapped past it. The
policy is :class:`agents.policies.TokenPolicy` with its own initialisation and Adam.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import rla_gym  # noqa: F401  (registers the env ids)
from agents.policies import TokenPolicy


def generalized_advantages(
    rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, gamma: float, gae_lambda: float
) -> torch.Tensor:
    """GAE(lambda) advantages, (steps, envs), as SB3's rollout buffer computes them.

    ``values`` has one row more than ``rewards``: the value of the observation after the last
    step. ``dones[t]`` marks an episode that ended at step ``t`` (nothing is bootstrapped past it).
    """
    advantages = torch.empty_like(rewards)
    last = torch.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        going = 1.0 - dones[t]
        delta = rewards[t] + gamma * values[t + 1] * going - values[t]
        last = delta + gamma * gae_lambda * going * last
        advantages[t] = last
    return advantages


class BatchedPPO:
    """PPO on ``gym.make_vec(env_id, n_envs)``'s array-state env at a fixed ``difficulty``.

    ``predict`` is the policy's (an SB3 policy), so ``agents.train.evaluate_policy`` takes it.

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
        encoder: str = "flatten-small", seed: int = 0, device: str = "cpu",
    ) -> None:  # fmt: skip
        if n_envs * n_steps < 2 or batch_size < 2:
            raise ValueError(
                f"n_envs * n_steps and batch_size must be >= 2, got {n_envs * n_steps}, {batch_size}"
            )
        self.envs = gym.make_vec(
            env_id, num_envs=n_envs, vectorization_mode="vector_entry_point",
            autoreset_mode=AutoresetMode.SAME_STEP, difficulty=difficulty,
        )  # fmt: skip
        self.n_envs, self.n_steps, self.batch_size, self.n_epochs = n_envs, n_steps, batch_size, n_epochs
        space = self.envs.single_observation_space
        tokens = space["tokens"] if isinstance(space, gym.spaces.Dict) and "tokens" in space.spaces else None
        if not isinstance(tokens, gym.spaces.Box) or len(tokens.shape) != 1:
            raise TypeError(f"{env_id!r} has no 1-D Box of token ids under 'tokens': {space!r}")
        self._length = tokens.shape[0]
        self.gamma, self.gae_lambda, self.clip_range = gamma, gae_lambda, clip_range
        self.ent_coef, self.vf_coef, self.max_grad_norm = ent_coef, vf_coef, max_grad_norm
        self.seed, self.device = seed, torch.device(device)
        torch.manual_seed(seed)
        self.policy = TokenPolicy(
            self.envs.single_observation_space, self.envs.single_action_space, lambda _: learning_rate,
            features_extractor_kwargs={"encoder": encoder},
            # SB3's Adam (eps 1e-5) as one fused kernel: the same update, a few % of the run faster
            optimizer_kwargs={"eps": 1e-5, "fused": self.device.type in ("cpu", "cuda")},
        ).to(self.device)  # fmt: skip
        self.generator = torch.Generator(self.device).manual_seed(seed)
        self.num_timesteps = 0
        #: outcomes (1 success, -1 failure) of the last 100 finished training episodes
        self.outcomes: deque[int] = deque(maxlen=100)
        self._obs: dict[str, np.ndarray] | None = None

    def predict(self, observation: Any, deterministic: bool = False, **kwargs: Any) -> Any:
        """The policy's ``predict`` (SB3's signature)."""
        return self.policy.predict(observation, deterministic=deterministic, **kwargs)

    def _heads(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Action log-probabilities and values of a batch of token rows."""
        policy = self.policy
        latent_pi, latent_vf = policy.mlp_extractor(policy.features_extractor({"tokens": tokens}))
        return policy.action_net(latent_pi).log_softmax(-1), policy.value_net(latent_vf).squeeze(-1)

    def learn(self, total_timesteps: int) -> BatchedPPO:
        """Collect ``n_envs x n_steps`` steps, update, until ``total_timesteps`` more steps."""
        if self._obs is None:
            self._obs, _ = self.envs.reset(seed=self.seed)
        target = self.num_timesteps + total_timesteps
        while self.num_timesteps < target:
            rollout = self._collect()
            self._update(*rollout)
        return self

    def _collect(self) -> tuple[torch.Tensor, ...]:
        """One rollout: tokens, actions, old log-probabilities, advantages, returns (flat)."""
        shape = (self.n_steps, self.n_envs)
        tokens = torch.empty((*shape, self._length), dtype=torch.long)
        actions, rewards = torch.empty(shape, dtype=torch.long), torch.empty(shape)
        log_probs, dones = torch.empty(shape), torch.empty(shape)
        values = torch.empty((shape[0] + 1, shape[1]))
        assert self._obs is not None
        obs = self._obs
        with torch.no_grad():
            for t in range(self.n_steps):
                tokens[t] = torch.from_numpy(obs["tokens"])
                log_p, values[t] = self._heads(tokens[t].to(self.device))
                action = torch.multinomial(log_p.exp(), 1, generator=self.generator)
                log_probs[t] = log_p.gather(1, action).squeeze(1).cpu()
                actions[t] = action.squeeze(1).cpu()
                obs, _, terminated, truncated, _ = self.envs.step(actions[t].numpy())
                outcome = terminated.astype(np.float32) - truncated.astype(np.float32)
                rewards[t], dones[t] = torch.from_numpy(outcome), torch.from_numpy(terminated | truncated)
                self.outcomes.extend(outcome[outcome != 0].astype(int).tolist())
            values[-1] = self._heads(torch.from_numpy(obs["tokens"]).to(self.device))[1].cpu()
        self._obs = obs
        self.num_timesteps += self.n_steps * self.n_envs
        advantages = generalized_advantages(rewards, values, dones, self.gamma, self.gae_lambda)
        returns = advantages + values[:-1]
        flat = (actions, log_probs, advantages, returns)
        return (tokens.flatten(0, 1), *(x.flatten() for x in flat))

    def _update(
        self, tokens: torch.Tensor, actions: torch.Tensor, old_log_probs: torch.Tensor,
        advantages: torch.Tensor, returns: torch.Tensor,
    ) -> None:  # fmt: skip
        """``n_epochs`` passes of minibatch updates over one rollout."""
        on = [x.to(self.device) for x in (tokens, actions, old_log_probs, advantages, returns)]
        optimizer, parameters = self.policy.optimizer, list(self.policy.parameters())
        for _ in range(self.n_epochs):
            order = torch.randperm(len(actions), generator=self.generator, device=self.device)
            for start in range(0, len(actions), self.batch_size):
                tok, act, old, adv, ret = (x[order[start : start + self.batch_size]] for x in on)
                log_p, value = self._heads(tok)
                if len(adv) > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                ratio = torch.exp(log_p.gather(1, act[:, None]).squeeze(1) - old)
                clipped = torch.clamp(ratio, 1 - self.clip_range, 1 + self.clip_range)
                loss = -torch.min(adv * ratio, adv * clipped).mean()
                loss = loss + self.vf_coef * torch.nn.functional.mse_loss(ret, value)
                if self.ent_coef:
                    loss = loss + self.ent_coef * (log_p.exp() * log_p).sum(-1).mean()
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, self.max_grad_norm)
                optimizer.step()
