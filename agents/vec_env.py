"""An SB3 ``VecEnv`` over the suite's batched vector envs (``rla_gym.vector.RLAVectorEnv``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from rla_gym.registration import make_rla_env
from rla_gym.vector import RLAVectorEnv


def _rows(info: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Each sub-env's entries of a batched Gymnasium info (those its ``_key`` mask marks)."""
    keys = [k for k in info if not k.startswith("_") and k not in ("final_obs", "final_info")]
    full = [k for k in keys if info["_" + k].all()]
    rows = [dict(zip(full, values, strict=True)) for values in zip(*(info[k] for k in full), strict=True)]
    if not full:
        rows = [{} for _ in range(n)]
    for key in keys:
        if key not in full:
            values = info[key]
            for i in np.flatnonzero(info["_" + key]).tolist():
                rows[i][key] = values[i]
    return rows


class BatchedVecEnv(VecEnv):
    """SB3's ``VecEnv`` API over ``gym.make_vec(env_id, n_envs)``'s batched env, autoreset in the same step.

    One call steps all sub-envs; SB3 then gets what ``DummyVecEnv`` gives it: a done sub-env
    starts its next episode in the same step, its last observation is
    ``infos[i]["terminal_observation"]``, its last info is ``infos[i]`` and the new episode's
    reset info is ``reset_infos[i]`` (``TimeLimit.truncated`` marks a step-budget cut).
    An episode's last info holds ``info["episode"]`` (its return ``r``, length ``l`` and time
    ``t``), as SB3's ``Monitor`` gives it, so SB3 logs ``rollout/ep_rew_mean``;
    ``set_options`` reaches the next reset (one options dict for every sub-env).
    ``env_method``, ``get_attr`` and ``set_attr`` reach the bare sub-envs, so
    ``env_method("set_task", task, indices=[i])`` works as with ``DummyVecEnv``; MaskablePPO's
    ``env_method("action_masks")`` reads the batch's current masks. ``envs`` are the bare
    sub-envs (the group trainer steps them itself). Under the array state (from 64 sub-envs,
    ``ARRAY_STATE_MIN_ENVS``) the running state lives in the batch's arrays: the bare sub-envs
    hold their tasks and settings, not their running state, so read a step's state from its
    infos, not through ``get_attr`` or ``env_method``.

    Examples:
        >>> import rla_gym
        >>> venv = BatchedVecEnv("RLA-TextNav-v0", 4, seed=0, env_kwargs={"difficulty": 0.1})
        >>> venv.reset()["tokens"].shape
        (4, 69)
    """

    def __init__(
        self, env_id: str, n_envs: int, *, seed: int | None = None, env_kwargs: dict[str, Any] | None = None
    ) -> None:
        if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs < 1:
            raise ValueError(f"n_envs must be an integer >= 1, got {n_envs!r}")
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0
        ):
            raise ValueError(f"seed must be an integer >= 0 or None, got {seed!r}")
        make_rla_env(env_id).close()  # an unknown or foreign id is named before make_vec's own error
        vector = gym.make_vec(
            env_id, num_envs=n_envs, vectorization_mode="vector_entry_point",
            autoreset_mode=AutoresetMode.SAME_STEP, **(env_kwargs or {}),
        )  # fmt: skip
        if not isinstance(vector, RLAVectorEnv):
            raise TypeError(f"{env_id!r} has no batched rla-gym vector env (got {type(vector).__name__})")
        self.vector = vector
        self.envs = vector.envs
        super().__init__(n_envs, vector.single_observation_space, vector.single_action_space)
        if seed is not None:
            self.seed(seed)
        self._actions: np.ndarray | None = None
        # what SB3's Monitor counts per sub-env: the running episode's return and length
        self._returns = np.zeros(n_envs, dtype=np.float64)
        self._lengths = np.zeros(n_envs, dtype=np.int64)
        self._start = time.time()

    def reset(self) -> VecEnvObs:
        seeds = self._seeds if any(s is not None for s in self._seeds) else None
        given = [options for options in self._options if options]
        if any(options != given[0] for options in given) or 0 < len(given) < self.num_envs:
            raise ValueError(f"BatchedVecEnv takes one options dict for every sub-env, got {self._options!r}")
        obs, info = self.vector.reset(seed=seeds, options=given[0] if given else None)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = _rows(info, self.num_envs)
        self._returns[:], self._lengths[:] = 0.0, 0
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        assert self._actions is not None
        obs, rewards, terminated, truncated, info = self.vector.step(self._actions)
        dones = terminated | truncated
        self._returns += rewards
        self._lengths += 1
        infos = _rows(info, self.num_envs)
        for i in np.flatnonzero(~dones).tolist():
            infos[i]["TimeLimit.truncated"] = False
        if dones.any():
            finals = _rows(info["final_info"], self.num_envs)
            for i in np.flatnonzero(dones).tolist():
                self.reset_infos[i] = infos[i]
                last = finals[i]
                last["terminal_observation"] = info["final_obs"][i]
                last["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                last["episode"] = {
                    "r": round(float(self._returns[i]), 6), "l": int(self._lengths[i]),
                    "t": round(time.time() - self._start, 6),
                }  # fmt: skip
                infos[i] = last
            self._returns[dones], self._lengths[dones] = 0.0, 0
        return obs, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        self.vector.close()

    def _indices(self, indices: VecEnvIndices) -> Iterable[int]:
        if indices is None:
            return range(self.num_envs)
        return [indices] if isinstance(indices, int) else list(indices)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [getattr(self.envs[i], attr_name) for i in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for i in self._indices(indices):
            setattr(self.envs[i], attr_name, value)

    def env_method(
        self, method_name: str, *args: Any, indices: VecEnvIndices = None, **kwargs: Any
    ) -> list[Any]:
        if method_name == "action_masks":  # the batch holds the masks (array-state sub-envs do not)
            masks = self.vector.action_masks()
            return [masks[i] for i in self._indices(indices)]
        return [getattr(self.envs[i], method_name)(*args, **kwargs) for i in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        raise NotImplementedError("BatchedVecEnv does not render")
