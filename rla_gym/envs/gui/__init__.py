"""RLA-GUI-v0: settings tasks in a synthetic desktop application (OSWorld / MiniWoB-like)."""

from rla_gym.envs.gui.env import GUIEnv
from rla_gym.envs.gui.knobs import GUIKnobs, gui_knobs
from rla_gym.envs.gui.oracle import scroll_cost

__all__ = ["GUIEnv", "GUIKnobs", "gui_knobs", "scroll_cost"]
