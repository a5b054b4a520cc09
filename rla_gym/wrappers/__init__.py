"""Adapters between curricula and envs: one per execution model (SB3's lives in ``agents``)."""

from rla_gym.wrappers.curriculum import AdaptiveDifficultyWrapper, CurriculumWrapper, episode_result
from rla_gym.wrappers.vector import CurriculumVectorWrapper

__all__ = ["AdaptiveDifficultyWrapper", "CurriculumVectorWrapper", "CurriculumWrapper", "episode_result"]
