"""Shared fixtures: one torch thread, and the registry filtered to rla-gym's own ids."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

import rla_gym

torch.set_num_threads(1)

#: Every id registered by rla_gym, read from the registry (not a hand-kept list).
RLA_ENV_IDS = sorted(
    env_id
    for env_id, spec in gym.registry.items()
    if isinstance(spec.entry_point, str) and spec.entry_point.startswith("rla_gym.")
)
LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)
assert set(RLA_ENV_IDS) == set(rla_gym.ENV_IDS)


@pytest.fixture(params=RLA_ENV_IDS)
def env_id(request: pytest.FixtureRequest) -> str:
    return request.param
