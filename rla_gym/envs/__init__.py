"""The environment families of the suite, one module (or small package) each."""

from rla_gym.envs.gui import GUI_VERSIONS, GUIEnv, GUIEnvV1, GUIKnobs, gui_knobs
from rla_gym.envs.household import HouseholdEnv, HouseholdKnobs, household_knobs
from rla_gym.envs.reason import ReasonEnv, ReasonKnobs, reason_knobs
from rla_gym.envs.textnav import TextNavEnv, TextNavKnobs, textnav_knobs

__all__ = [
    "GUI_VERSIONS",
    "GUIEnv",
    "GUIEnvV1",
    "GUIKnobs",
    "HouseholdEnv",
    "HouseholdKnobs",
    "ReasonEnv",
    "ReasonKnobs",
    "TextNavEnv",
    "TextNavKnobs",
    "gui_knobs",
    "household_knobs",
    "reason_knobs",
    "textnav_knobs",
]
