"""Bindings to other trainers. Each module imports its trainer when imported itself, never
from here: ``agents.integrations.rllib`` needs ``pip install 'rla-gym[rllib]'``."""
