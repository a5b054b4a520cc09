"""rla-gym: Gymnasium environments whose difficulty adapts to the learner (RLAnything).

``import rla_gym`` registers the environment ids, e.g. ``gym.make("RLA-TextNav-v0")``.
"""

from rla_gym.core import RLAEnv, Task, check_difficulty
from rla_gym.registration import ENV_IDS, register_envs

register_envs()

__all__ = ["ENV_IDS", "RLAEnv", "Task", "check_difficulty", "register_envs"]
__version__ = "0.1.0"
