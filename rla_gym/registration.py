"""Registers every rla-gym environment id with Gymnasium (runs on ``import rla_gym``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

#: Registered ids and their entry points. Difficulty and obs mode are kwargs, not ids.
ENV_IDS: dict[str, str] = {
    "RLA-TextNav-v0": "rla_gym.envs.textnav:TextNavEnv",
    "RLA-Household-v0": "rla_gym.envs.household:HouseholdEnv",
    "RLA-GUI-v0": "rla_gym.envs.gui:GUIEnv",
    "RLA-GUI-v1": "rla_gym.envs.gui:GUIEnvV1",
    "RLA-Reason-v0": "rla_gym.envs.reason:ReasonEnv",
}


def register_envs() -> None:
    """Register the ids in :data:`ENV_IDS` (idempotent), each with its batched vector env
    (``gym.make_vec``'s default for them; ``vectorization_mode="sync"`` gives ``SyncVectorEnv``)."""
    from gymnasium.envs.registration import load_env_creator

    from rla_gym.vector import vector_entry_point

    for env_id, entry_point in ENV_IDS.items():
        if env_id not in gym.registry:
            # No max_episode_steps: each task carries its own step budget and truncates itself.
            gym.register(
                id=env_id, entry_point=entry_point, disable_env_checker=False,
                vector_entry_point=vector_entry_point(load_env_creator(entry_point)),  # type: ignore[arg-type]
            )  # fmt: skip


def make_rla_env(env_id: str, **kwargs: Any) -> gym.Env[Any, Any]:
    """``gym.make(env_id, **kwargs)`` for an rla-gym environment; an id Gymnasium does not know,
    or one that is not an rla-gym environment, raises a ``ValueError`` that names it and lists
    the suite's ids.

    Examples:
        >>> make_rla_env("RLA-TextNav-v0", difficulty=0.5).unwrapped.difficulty
        0.5
    """
    from rla_gym.core import RLAEnv

    try:
        env = gym.make(env_id, **kwargs)
    except gym.error.Error as error:  # NameNotFound, VersionNotFound, ...
        raise ValueError(f"unknown env id {env_id!r}; the rla-gym ids are {sorted(ENV_IDS)}") from error
    if not isinstance(env.unwrapped, RLAEnv):
        env.close()
        raise ValueError(f"{env_id!r} is not an rla-gym environment; the rla-gym ids are {sorted(ENV_IDS)}")
    return env
