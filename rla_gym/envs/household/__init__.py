"""RLA-Household-v0: ALFWorld-like household tasks (see :class:`HouseholdEnv`)."""

from rla_gym.envs.household.catalog import ACTION_NAMES, HouseholdKnobs, household_knobs
from rla_gym.envs.household.env import HouseholdEnv

__all__ = ["ACTION_NAMES", "HouseholdEnv", "HouseholdKnobs", "household_knobs"]
