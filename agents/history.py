"""Memory for the memoryless token policies: the last k observations and actions as one observation.

From d = 0.5 TextNav names neither the way to the goal nor where an exit leads, so a policy
that sees only the current observation cannot tell the exit it came through from the ones it
has not tried. :class:`HistoryVecEnv` gives it a history instead of a recurrent state: its
``tokens`` hold the last ``frames`` observations' tokens (the current one first) and the last
``frames`` actions (the latest first) as extra token ids, zeros where an episode has fewer
steps, so any token encoder (``agents.policies``) reads them with no change. ``action_mask``
stays the current one, so MaskablePPO masks as before. ``LoopSettings(history=k)`` puts it on
top of the loop's stack (:func:`agents.loop.build_loop`).

A history policy evaluates through :func:`history_batch_agent`, which keeps the same history
over the batched evaluator's episodes (:func:`agents.evaluation.evaluate_batched`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from agents.evaluation import BatchAgent


def check_frames(frames: int, name: str = "history") -> int:
    """``frames`` if it is an integer >= 1, else a ValueError naming it."""
    if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)) or frames < 1:
        raise ValueError(f"{name} must be an integer >= 1 (observations and actions kept), got {frames!r}")
    return int(frames)


class TokenHistory:
    """The last ``frames`` token observations and actions of ``n`` episodes, as one token row each.

    Row layout: ``frames`` observations of ``length`` tokens (the current one first), then
    ``frames`` action tokens (the latest first). Action a is token ``action_base + a``; 0 (the
    padding id) stands for "no observation / no action yet".

    Examples:
        >>> h = TokenHistory(1, length=2, frames=2, action_base=10)
        >>> h.start(np.array([True]), np.array([[3, 4]]))
        >>> h.push(np.array([[5, 6]]), np.array([2]))
        >>> h.tokens().tolist()
        [[5, 6, 3, 4, 12, 0]]
    """

    def __init__(self, n: int, *, length: int, frames: int, action_base: int) -> None:
        self.frames = check_frames(frames, "frames")
        self.action_base = int(action_base)
        self._obs = np.zeros((n, self.frames, length), dtype=np.int64)
        self._actions = np.zeros((n, self.frames), dtype=np.int64)

    def push(self, tokens: np.ndarray, actions: np.ndarray, rows: Any = slice(None)) -> None:
        """Rows ``rows`` took ``actions`` and now see ``tokens``: shift their history by one."""
        self._obs[rows, 1:] = self._obs[rows, :-1]
        self._obs[rows, 0] = tokens
        self._actions[rows, 1:] = self._actions[rows, :-1]
        self._actions[rows, 0] = self.action_base + np.asarray(actions, dtype=np.int64)

    def start(self, rows: np.ndarray, tokens: np.ndarray) -> None:
        """Rows where ``rows`` is True begin an episode seeing ``tokens`` (one row each): no past."""
        self._obs[rows] = 0
        self._actions[rows] = 0
        self._obs[rows, 0] = tokens

    def tokens(self, rows: Any = slice(None)) -> np.ndarray:
        """The token rows of ``rows``: (rows, frames * length + frames)."""
        obs = self._obs[rows]
        return np.concatenate([obs.reshape(obs.shape[0], -1), self._actions[rows]], axis=1)

    def copy_rows(self, rows: np.ndarray) -> TokenHistory:
        """A history holding only ``rows`` of this one (their state now)."""
        other = TokenHistory.__new__(TokenHistory)
        other.frames, other.action_base = self.frames, self.action_base
        other._obs, other._actions = self._obs[rows].copy(), self._actions[rows].copy()
        return other


def action_base(tokens: gym.spaces.Box) -> int:
    """The token id of action 0 in a history over observations whose token ids are ``tokens``."""
    return int(tokens.high.max()) + 1


def history_space(space: gym.spaces.Space, action_space: gym.spaces.Space, frames: int) -> gym.spaces.Dict:
    """The observation space that :class:`HistoryVecEnv` makes of a token ``space``."""
    if not isinstance(space, gym.spaces.Dict) or "tokens" not in space.spaces:
        raise TypeError(f"history needs a dict observation with 'tokens' (obs_mode='dict'), got {space!r}")
    tokens = space["tokens"]
    if not isinstance(tokens, gym.spaces.Box) or len(tokens.shape) != 1:
        raise TypeError(f"expected a 1-D Box of token ids under 'tokens', got {tokens!r}")
    if not isinstance(action_space, gym.spaces.Discrete):
        raise TypeError(f"history stores Discrete actions as tokens, got {action_space!r}")
    frames = check_frames(frames)
    base = action_base(tokens)
    high = np.concatenate([np.tile(tokens.high, frames), np.full(frames, base + int(action_space.n) - 1)])
    spaces = dict(space.spaces)
    spaces["tokens"] = gym.spaces.Box(0, high.astype(np.int64), dtype=np.int64)
    return gym.spaces.Dict(spaces)


class HistoryVecEnv(VecEnvWrapper):
    """An SB3 VecEnv whose ``tokens`` are the last ``frames`` observations and actions (see module).

    A sub-env's history starts empty at every episode start, autoresets included: its first
    observation is followed by zeros. ``infos[i]["terminal_observation"]`` gets the history
    that ended with it. Everything else (``action_mask``, rewards, infos, ``reset_infos``,
    ``env_method("action_masks")``) passes through unchanged.

    Examples:
        >>> import rla_gym
        >>> from stable_baselines3.common.env_util import make_vec_env
        >>> venv = HistoryVecEnv(make_vec_env("RLA-TextNav-v0", n_envs=2), frames=4)
        >>> venv.reset()["tokens"].shape  # 4 x 69 observation tokens, 4 action tokens
        (2, 280)
    """

    def __init__(self, venv: VecEnv, frames: int) -> None:
        space = history_space(venv.observation_space, venv.action_space, frames)
        super().__init__(venv, observation_space=space)
        inner = venv.observation_space["tokens"]  # type: ignore[index]
        self.frames = check_frames(frames)
        self.history = TokenHistory(
            self.num_envs, length=inner.shape[0], frames=self.frames, action_base=action_base(inner)
        )
        self._actions = np.zeros(self.num_envs, dtype=np.int64)

    def _observation(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**obs, "tokens": self.history.tokens()}

    def reset(self) -> VecEnvObs:
        obs: Any = self.venv.reset()
        self.reset_infos = self.venv.reset_infos  # SB3's VecEnvWrapper does not pass them on
        self.history.start(np.ones(self.num_envs, dtype=bool), obs["tokens"])
        return self._observation(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)
        self.venv.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        obs: Any
        obs, rewards, dones, infos = self.venv.step_wait()
        self.reset_infos = self.venv.reset_infos
        done = np.asarray(dones, dtype=bool)
        if done.any():  # the ended episodes' last history, before their next episode starts
            ended = np.flatnonzero(done)
            last = self.history.copy_rows(ended)
            terminal = np.stack([infos[i]["terminal_observation"]["tokens"] for i in ended])
            last.push(terminal, self._actions[ended])
            for j, i in enumerate(ended.tolist()):
                infos[i]["terminal_observation"] = {
                    **infos[i]["terminal_observation"],
                    "tokens": last.tokens([j])[0],
                }
        self.history.push(obs["tokens"], self._actions)
        self.history.start(done, obs["tokens"][done])
        return self._observation(obs), rewards, dones, infos


class EpisodeStarts:
    """Which rows of a batched Gymnasium vector env begin an episode, from each step's info.

    Follows the autoreset modes the suite's evaluation uses: ``DISABLED`` (a row that ended is
    frozen, its mask entries False, until the next ``reset``, which starts it again) and
    ``SAME_STEP`` (``info["_final_obs"]`` marks rows whose observation is already the next
    episode's first). The first call is a reset: every row starts; so is a call whose info
    carries ``episode_start`` (a bool per row, set by a caller that reset the env: a row that
    ended on the step before the reset may never have been seen ending).
    """

    def __init__(self) -> None:
        self._ended: np.ndarray | None = None

    def __call__(self, info: dict[str, Any], n: int) -> tuple[np.ndarray, np.ndarray]:
        """(starts, live): rows starting an episode now, rows whose observation is meaningful."""
        live = np.asarray(info.get("_action_mask", np.ones(n, dtype=bool)), dtype=bool)
        marked = info.get("episode_start")
        if self._ended is None or len(self._ended) != n:
            self._ended = np.zeros(n, dtype=bool)
            starts = live.copy()
        elif marked is not None:  # the caller reset these rows
            starts = live & np.asarray(marked, dtype=bool)
        else:
            starts = live & self._ended
            if "_final_obs" in info:  # SAME_STEP: the observation is the next episode's first
                starts |= np.asarray(info["_final_obs"], dtype=bool)
        outcome = np.asarray(info.get("outcome", np.zeros(n)))
        ended_now = live & ~starts & (outcome != 0)  # DISABLED: this row's observation is its last
        self._ended = (self._ended & ~starts) | ended_now
        return starts, live & ~ended_now


def history_batch_agent(model: Any, frames: int, masked: bool, deterministic: bool) -> BatchAgent:
    """An SB3 model trained on :class:`HistoryVecEnv` (``frames``) as a batch agent for
    :func:`agents.evaluation.evaluate_batched`: greedy, or stochastic with ``deterministic=False``.

    It keeps each row's history itself (:class:`EpisodeStarts` finds the episode starts); use a
    fresh agent for each evaluation.
    """
    frames = check_frames(frames)
    starts_of = EpisodeStarts()
    state: dict[str, Any] = {}

    def act(obs: Any, info: dict[str, Any]) -> np.ndarray:
        tokens = np.asarray(obs["tokens"])
        n = tokens.shape[0]
        if state.get("n") != n:
            base = int(model.observation_space["tokens"].high[-1]) - int(model.action_space.n) + 1
            state.update(n=n, actions=np.zeros(n, dtype=np.int64))
            state["history"] = TokenHistory(n, length=tokens.shape[1], frames=frames, action_base=base)
        history: TokenHistory = state["history"]
        starts, live = starts_of(info, n)
        stepped = live & ~starts
        history.push(tokens[stepped], state["actions"][stepped], stepped)
        history.start(starts, tokens[starts])
        stacked = {**obs, "tokens": history.tokens()}
        if masked:  # MaskablePPO acts on admissible commands only when it is given the masks
            masks = info["action_mask"] == 1
            actions = model.predict(stacked, deterministic=deterministic, action_masks=masks)[0]
        else:
            actions = model.predict(stacked, deterministic=deterministic)[0]
        state["actions"] = np.asarray(actions, dtype=np.int64).reshape(n)
        return state["actions"]

    return act
