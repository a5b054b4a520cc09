"""SB3 features extractors for rla-gym token observations."""

from __future__ import annotations

import gymnasium as gym
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn


class TokenFeaturesExtractor(BaseFeaturesExtractor):
    """Embeds the ``tokens`` of a dict observation per position, then an MLP.

    SB3 hands Box observations over as float32, so ids are cast back to long
    before the embedding. The action mask is not a feature (it masks actions).

    Example:
        >>> import gymnasium as gym, rla_gym
        >>> from stable_baselines3 import PPO
        >>> model = PPO("MultiInputPolicy", gym.make("RLA-TextNav-v0"),
        ...             policy_kwargs={"features_extractor_class": TokenFeaturesExtractor}, n_steps=64)
    """

    def __init__(
        self, observation_space: gym.spaces.Dict, features_dim: int = 128, embed_dim: int = 16
    ) -> None:
        super().__init__(observation_space, features_dim)
        tokens = observation_space["tokens"]
        if not isinstance(tokens, gym.spaces.Box) or len(tokens.shape) != 1:
            raise TypeError(f"expected a 1-D Box of token ids under 'tokens', got {tokens!r}")
        vocab_size = int(tokens.high.max()) + 1
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.head = nn.Sequential(nn.Linear(tokens.shape[0] * embed_dim, features_dim), nn.ReLU())

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        ids = observations["tokens"].long()
        return self.head(self.embedding(ids).flatten(start_dim=1))
