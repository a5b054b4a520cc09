"""Curriculum strategies: pure Python objects that pick tasks and learn from episodes.

``CURRICULA`` maps the names used on the command line to the classes.
"""

from rla_gym.curricula.base import Curriculum, EpisodeResult
from rla_gym.curricula.fixed import FixedCurriculum, UniformCurriculum
from rla_gym.curricula.learnability import LearnabilityCurriculum
from rla_gym.curricula.learning_progress import LearningProgressCurriculum
from rla_gym.curricula.plr import PrioritizedLevelReplay
from rla_gym.curricula.remote import CurriculumServer, RemoteCurriculum, serve_curriculum
from rla_gym.curricula.rm_balance import RewardModelBalanceCurriculum
from rla_gym.curricula.simulated import SimulatedLearner, SimulatedRewardModel, Simulation, simulate
from rla_gym.curricula.success_band import SuccessBandCurriculum
from rla_gym.curricula.task_pool import FreshTaskPoolCurriculum, TaskPoolCurriculum

CURRICULA: dict[str, type[Curriculum]] = {
    "fixed": FixedCurriculum,
    "uniform": UniformCurriculum,
    "success-band": SuccessBandCurriculum,
    "rm-balance": RewardModelBalanceCurriculum,
    "task-pool": TaskPoolCurriculum,
    "task-pool-fresh": FreshTaskPoolCurriculum,
    "plr": PrioritizedLevelReplay,
    "learning-progress": LearningProgressCurriculum,
    "learnability": LearnabilityCurriculum,
}

__all__ = [
    "CURRICULA",
    "Curriculum",
    "CurriculumServer",
    "EpisodeResult",
    "FixedCurriculum",
    "FreshTaskPoolCurriculum",
    "LearnabilityCurriculum",
    "LearningProgressCurriculum",
    "PrioritizedLevelReplay",
    "RemoteCurriculum",
    "RewardModelBalanceCurriculum",
    "SimulatedLearner",
    "SimulatedRewardModel",
    "Simulation",
    "SuccessBandCurriculum",
    "TaskPoolCurriculum",
    "UniformCurriculum",
    "serve_curriculum",
    "simulate",
]
