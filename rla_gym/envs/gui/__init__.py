"""RLA-GUI-v0 and -v1: settings tasks in a synthetic desktop application (OSWorld / MiniWoB-like)."""

from rla_gym.envs.gui.env import GUIEnv, GUIEnvV1
from rla_gym.envs.gui.knobs import GUI_VERSIONS, GUIKnobs, gui_knobs
from rla_gym.envs.gui.oracle import scroll_cost

__all__ = ["GUI_VERSIONS", "GUIEnv", "GUIEnvV1", "GUIKnobs", "gui_knobs", "scroll_cost"]
