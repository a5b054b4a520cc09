"""RLA-Reason-v0: LiveBench-like reasoning as verified steps on a worksheet."""

from rla_gym.envs.reason.env import ACTION_NAMES, ERASE, MINUS, THINK, TYPE_, WRITE_, ReasonEnv
from rla_gym.envs.reason.tasks import FAMILIES, MEMORY, ROWS, VARS, ReasonKnobs, reason_knobs

__all__ = [
    "ACTION_NAMES",
    "ERASE",
    "FAMILIES",
    "MEMORY",
    "MINUS",
    "ROWS",
    "THINK",
    "TYPE_",
    "VARS",
    "WRITE_",
    "ReasonEnv",
    "ReasonKnobs",
    "reason_knobs",
]
