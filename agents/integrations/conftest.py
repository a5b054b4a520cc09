"""Doctest collection skips the RLlib binding where RLlib is not installed (the dev venv)."""

try:
    import ray.rllib  # noqa: F401
except ImportError:
    collect_ignore = ["rllib.py"]
