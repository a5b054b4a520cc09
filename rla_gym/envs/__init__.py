"""The environment families of the suite, one module each."""

from rla_gym.envs.textnav import TextNavEnv, TextNavKnobs, textnav_knobs

__all__ = ["TextNavEnv", "TextNavKnobs", "textnav_knobs"]
