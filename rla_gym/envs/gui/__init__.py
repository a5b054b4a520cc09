"""RLA-GUI-v0: settings tasks in a synthetic desktop application (OSWorld / MiniWoB-like)."""

from rla_gym.envs.gui.env import GUIEnv, GUIKnobs, gui_knobs, scroll_cost

__all__ = ["GUIEnv", "GUIKnobs", "gui_knobs", "scroll_cost"]
