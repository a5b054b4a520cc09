"""RLlib (new API stack): env registration for remote runners, a masking RLModule, one curriculum.

- :func:`register_rllib_envs` registers every rla-gym id with RLlib's env registry. The creator
  imports ``rla_gym`` on each env runner, so a plain id works on remote runners.
- :class:`MaskedTokenRLModule` reads the ``Dict`` observation: it embeds the ``tokens``
  (:class:`agents.policies.TokenFeaturesExtractor`) and masks the logits of every action that
  ``action_mask`` forbids, so no masked action is ever sampled.
- ``env_config={"curriculum": name}`` connects every env of every runner to the curriculum a Ray
  actor serves (``rla_gym.curricula.serve_curriculum(curriculum, name=name)``): each env draws
  its tasks from it and reports each finished episode to it once.
- :class:`CurriculumMetricsCallback` puts the served curriculum's metrics in RLlib's results.

Needs Ray's RLlib (``pip install 'rla-gym[rllib]'``). ``docs/integrations.md`` has a tested example.
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
from collections.abc import Callable, Iterable
from typing import Any

import gymnasium as gym

try:
    import ray
    import torch
    from ray.rllib.callbacks.callbacks import RLlibCallback
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
    from ray.rllib.core.rl_module.torch import TorchRLModule
    from ray.rllib.utils.torch_utils import FLOAT_MIN
    from ray.tune.registry import register_env
    from torch import nn
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"agents.integrations.rllib needs RLlib: pip install 'rla-gym[rllib]' ({error})"
    ) from error

from agents.policies import TokenFeaturesExtractor
from rla_gym.curricula import RemoteCurriculum
from rla_gym.registration import ENV_IDS
from rla_gym.wrappers import CurriculumWrapper

#: The ``env_config`` key that names the served curriculum (``serve_curriculum(..., name=...)``).
CURRICULUM_KEY = "curriculum"

_made = itertools.count()  # envs this process has made: its sub-env index within the runner


def make_rllib_env(
    env_id: str,
    config: dict[str, Any],
    *,
    wrap: Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]] | None = None,
) -> gym.Env[Any, Any]:
    """RLlib's env creator for ``env_id``; ``config`` is RLlib's ``EnvContext`` (the ``env_config``).

    Every key but ``"curriculum"`` goes to ``gym.make``. ``wrap`` wraps the env first (e.g. a
    reward-model wrapper that writes ``info["rm_outcome_prediction"]``). With ``"curriculum"``,
    the env draws its tasks from the curriculum served under that name. Its slot is
    ``k * (num_env_runners + 1) + worker_index`` for the runner's k-th env, so every env of
    every runner has its own.
    """
    import rla_gym  # noqa: F401  (registers the ids in this process)

    kwargs = dict(config)
    name = kwargs.pop(CURRICULUM_KEY, None)
    if "num_envs" in kwargs:
        raise ValueError(
            "the rla-gym creator makes one env per call: keep RLlib's gym_env_vectorize_mode 'sync' (default)"
        )
    env = gym.make(env_id, **kwargs)
    if wrap is not None:
        env = wrap(env)
    if name is None:
        return env
    if multiprocessing.parent_process() is not None:
        raise RuntimeError(
            "a served curriculum needs the env in the env runner's process: keep RLlib's "
            "gym_env_vectorize_mode 'sync' (default), not 'async'"
        )
    runner, runners = getattr(config, "worker_index", 0), getattr(config, "num_workers", 0) or 0
    slot = next(_made) * (runners + 1) + runner
    return CurriculumWrapper(env, RemoteCurriculum(ray.get_actor(name)), slot=slot)


def register_rllib_envs(
    env_ids: Iterable[str] | None = None,
    *,
    wrap: Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]] | None = None,
) -> list[str]:
    """Register ``env_ids`` (default: every rla-gym id) with RLlib under their own names.

    Call it on the driver after ``ray.init()``; Ray ships the creators to every env runner.
    ``wrap`` is applied to each env first (see :func:`make_rllib_env`). Returns the ids.
    """
    ids = list(ENV_IDS) if env_ids is None else list(env_ids)
    unknown = sorted(set(ids) - set(ENV_IDS))
    if unknown:
        raise ValueError(f"not rla-gym ids: {unknown}; the ids are {sorted(ENV_IDS)}")
    for env_id in ids:
        register_env(env_id, functools.partial(make_rllib_env, env_id, wrap=wrap))
    return ids


class MaskedTokenRLModule(TorchRLModule, ValueFunctionAPI):
    """A PPO-ready RLModule for the ``{tokens, action_mask}`` observation.

    :class:`agents.policies.TokenFeaturesExtractor` encodes the tokens (shared by both heads);
    a policy head and a value head of one hidden layer each follow. Forbidden actions get the
    lowest logit (``FLOAT_MIN``), so they have probability 0 in sampling, inference and the loss.

    ``model_config`` keys (all optional): ``encoder`` ("flatten"), ``features_dim`` (128),
    ``embed_dim`` (16), ``hidden`` (64).
    """

    def setup(self) -> None:
        space = self.observation_space
        if not isinstance(space, gym.spaces.Dict) or set(space.spaces) != {"tokens", "action_mask"}:
            raise TypeError(
                f"MaskedTokenRLModule needs the rla-gym Dict(tokens, action_mask) observation, got {space!r}"
            )
        config = self.model_config if isinstance(self.model_config, dict) else {}
        features = int(config.get("features_dim", 128))
        hidden = int(config.get("hidden", 64))
        self.encoder = TokenFeaturesExtractor(
            space, features_dim=features, embed_dim=int(config.get("embed_dim", 16)),
            encoder=config.get("encoder", "flatten"),
        )  # fmt: skip
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise TypeError(f"MaskedTokenRLModule needs a Discrete action space, got {self.action_space!r}")
        actions = int(self.action_space.n)
        self.pi = nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, actions))
        self.vf = nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def _masked_logits(self, obs: dict[str, torch.Tensor], features: torch.Tensor) -> torch.Tensor:
        return self.pi(features).masked_fill(obs["action_mask"] == 0, FLOAT_MIN)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = batch[Columns.OBS]
        return {Columns.ACTION_DIST_INPUTS: self._masked_logits(obs, self.encoder(obs))}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = batch[Columns.OBS]
        features = self.encoder(obs)  # kept for the value head: PPO's loss passes them back
        return {Columns.ACTION_DIST_INPUTS: self._masked_logits(obs, features), Columns.EMBEDDINGS: features}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is None:
            embeddings = self.encoder(batch[Columns.OBS])
        return self.vf(embeddings).squeeze(-1)


class CurriculumMetricsCallback(RLlibCallback):
    """Logs the served curriculum's metrics under ``curriculum/`` in RLlib's results.

    They come from each finished episode's last ``info["curriculum"]``; each runner keeps its
    latest, and the results average the runners.
    """

    def on_episode_end(self, *, episode: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
        info = episode.get_infos(-1)
        if metrics_logger is None or not isinstance(info, dict):
            return
        for key, value in info.get("curriculum", {}).items():
            metrics_logger.log_value(("curriculum", key), float(value), window=1)
