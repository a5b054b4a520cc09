"""SB3 features extractors and policies for rla-gym token observations."""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import torch
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn
from torch.nn import functional as F

ENCODERS = ("flatten", "attention", "relational", "lookup", "lookup-lite", "flatten-small")
#: What ``encoder="auto"`` (``rla train``'s default) picks per env where it was measured to learn
#: more (``docs/policies.md``: MaskablePPO, 100k steps, 3 seeds); other envs (Reason, where
#: ``flatten`` learned more and its minibatches cost about 2.5x less) get ``"flatten"``.
AUTO_ENCODERS: dict[str, str] = {
    "RLA-TextNav-v0": "lookup-lite",
    "RLA-GUI-v0": "lookup-lite",
    "RLA-GUI-v1": "lookup-lite",  # v0's worlds but for one knob
    "RLA-Household-v0": "lookup-lite",
}


def resolve_encoder(encoder: str, env_id: str) -> str:
    """``encoder``, or for ``"auto"`` the one :data:`AUTO_ENCODERS` gives ``env_id`` (else flatten).

    Examples:
        >>> resolve_encoder("auto", "RLA-TextNav-v0"), resolve_encoder("auto", "RLA-Reason-v0")
        ('lookup-lite', 'flatten')
    """
    if encoder == "auto":
        return AUTO_ENCODERS.get(env_id, "flatten")
    if encoder not in ENCODERS:
        raise ValueError(f"encoder must be 'auto' or one of {ENCODERS}, got {encoder!r}")
    return encoder


class _RowGather(torch.autograd.Function):
    """``F.embedding(ids, weight, padding_idx=0)`` for 1-D ``ids``, summing rows with ``index_add_``.

    Same values and gradients up to the order of float sums; ``F.embedding``'s CPU backward sorts
    the ids first: on a 512 x 69-token minibatch its lookup takes about 2.7x this one's time.
    """

    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.rows = weight.shape[0]
        return weight.index_select(0, ids)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (ids,) = ctx.saved_tensors
        summed = grad.new_zeros(ctx.rows, grad.shape[1]).index_add_(0, ids, grad)
        summed[0] = 0.0  # the padding row stays zero, as with padding_idx=0
        return summed, None


def gather_rows(weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Rows ``weight[ids]`` for 1-D ``ids``, as ``F.embedding(ids, weight, padding_idx=0)`` (row 0
    gets no gradient) with a backward that sums rows by ``index_add_``: much faster on the CPU.

    On other devices it is ``F.embedding`` itself: ``index_add_`` sums with atomics on CUDA, so
    its gradients would change from run to run in the last bits.
    """
    if weight.device.type != "cpu":
        return F.embedding(ids, weight, padding_idx=0)
    return _RowGather.apply(weight, ids)


class TokenFeaturesExtractor(BaseFeaturesExtractor):
    """Embeds the ``tokens`` of a dict observation, then encodes them.

    ``encoder="flatten"`` (default) concatenates the per-position embeddings (the token
    layout is fixed, so position carries meaning) and applies a linear layer;
    ``"attention"`` adds learned position embeddings, one self-attention layer and mean
    pooling; ``"relational"`` adds to the flattened embeddings one binary feature per pair of
    positions holding the same token, and per pair of positions starting the same two tokens
    (names are two words), so "this room is the one the route names" is a linear feature;
    ``"lookup"`` adds to those, at every position, the mean embedding of the token that follows
    the other occurrences of the two words starting there (a content-addressed read), so
    "the direction the route gives for this room" is a linear feature too.
    ``"lookup-lite"`` is ``"flatten"`` plus that read alone, without the pairwise features, the
    positions grouped by bigram instead of compared pairwise (on TextNav a minibatch costs about
    2.2 times ``"flatten"``'s and a third of ``"lookup"``'s: ``benchmarks/encoder_cost.py``).
    ``"flatten-small"`` is ``"flatten"`` at 8-d embeddings and 64 features (unless given), its
    lookup's backward summing rows with ``index_add_``; with :class:`TokenPolicy`'s one 64-unit
    hidden layer per head for it, a PPO minibatch costs about half of ``"flatten"``'s
    (``docs/benchmarks.md``, training paths). SB3 hands Box observations over as float32, so
    ids are cast back to long. The action mask is not a feature: it masks actions (see
    :class:`MaskableTokenPolicy`).

    Examples:
        >>> import gymnasium as gym, rla_gym
        >>> from stable_baselines3 import PPO
        >>> model = PPO(TokenPolicy, gym.make("RLA-TextNav-v0"), n_steps=64)
    """

    def __init__(
        self,
        observation_space: gym.spaces.Dict,
        features_dim: int | None = None,
        embed_dim: int | None = None,
        encoder: Literal[
            "flatten", "attention", "relational", "lookup", "lookup-lite", "flatten-small"
        ] = "flatten",
    ) -> None:
        small = encoder == "flatten-small"
        features_dim = features_dim or (64 if small else 128)
        embed_dim = embed_dim or (8 if small else 16)
        super().__init__(observation_space, features_dim)
        tokens = observation_space["tokens"]
        if not isinstance(tokens, gym.spaces.Box) or len(tokens.shape) != 1:
            raise TypeError(f"expected a 1-D Box of token ids under 'tokens', got {tokens!r}")
        if encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {encoder!r}")
        length = tokens.shape[0]
        self.encoder = encoder
        self.embedding = nn.Embedding(int(tokens.high.max()) + 1, embed_dim, padding_idx=0)
        if encoder in ("flatten", "flatten-small"):
            self.head = nn.Sequential(nn.Linear(length * embed_dim, features_dim), nn.ReLU())
        elif encoder in ("relational", "lookup"):
            rows, cols = torch.triu_indices(length, length, offset=1)
            rows2, cols2 = torch.triu_indices(length - 1, length - 1, offset=1)
            self.pair_rows: torch.Tensor
            self.pair_cols: torch.Tensor
            self.bigram_rows: torch.Tensor
            self.bigram_cols: torch.Tensor
            self.register_buffer("pair_rows", rows, persistent=False)
            self.register_buffer("pair_cols", cols, persistent=False)
            self.register_buffer("bigram_rows", rows2, persistent=False)
            self.register_buffer("bigram_cols", cols2, persistent=False)
            self.vocab_size = int(tokens.high.max()) + 1
            width = length * embed_dim + rows.numel() + rows2.numel()
            if encoder == "lookup":
                width += (length - 1) * embed_dim
            self.head = nn.Sequential(nn.Linear(width, features_dim), nn.ReLU())
        elif encoder == "lookup-lite":
            self.vocab_size = int(tokens.high.max()) + 1
            width = (2 * length - 1) * embed_dim  # the embeddings, and a read per bigram position
            self.head = nn.Sequential(nn.Linear(width, features_dim), nn.ReLU())
        else:
            self.position = nn.Parameter(torch.zeros(length, embed_dim))
            self.attention = nn.TransformerEncoderLayer(
                embed_dim, nhead=2, dim_feedforward=4 * embed_dim, batch_first=True, dropout=0.0
            )
            self.head = nn.Sequential(nn.Linear(embed_dim, features_dim), nn.ReLU())

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        ids = observations["tokens"].long()
        if self.encoder == "flatten-small":
            rows = gather_rows(self.embedding.weight, ids.flatten())
            return self.head(rows.view(ids.shape[0], -1))
        embedded = self.embedding(ids)
        if self.encoder == "flatten":
            return self.head(embedded.flatten(start_dim=1))
        if self.encoder == "lookup-lite":
            bigrams = ids[:, :-1] * self.vocab_size + ids[:, 1:]
            read = self._grouped_lookup(bigrams, embedded, self.vocab_size**2).flatten(start_dim=1)
            return self.head(torch.cat([embedded.flatten(start_dim=1), read], dim=1))
        if self.encoder in ("relational", "lookup"):
            same = (ids[:, self.pair_rows] == ids[:, self.pair_cols]).float()
            bigrams = ids[:, :-1] * self.vocab_size + ids[:, 1:]
            if self.encoder == "relational":
                same2 = (bigrams[:, self.bigram_rows] == bigrams[:, self.bigram_cols]).float()
                return self.head(torch.cat([embedded.flatten(start_dim=1), same, same2], dim=1))
            match = self._bigram_matches(bigrams)  # the pairwise bigram features are its upper triangle
            same2 = match[:, self.bigram_rows, self.bigram_cols]
            read = self._lookup(match, embedded).flatten(start_dim=1)
            return self.head(torch.cat([embedded.flatten(start_dim=1), same, same2, read], dim=1))
        encoded = self.attention(embedded + self.position, src_key_padding_mask=ids == 0)
        keep = (ids != 0).unsqueeze(-1).float()
        pooled = (encoded * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        return self.head(pooled)

    @staticmethod
    def _bigram_matches(bigrams: torch.Tensor) -> torch.Tensor:
        """match[b, i, j] = 1.0 where positions i != j start the same two tokens."""
        match = (bigrams.unsqueeze(2) == bigrams.unsqueeze(1)).float()
        match.diagonal(dim1=1, dim2=2).zero_()
        return match

    @staticmethod
    def _lookup(match: torch.Tensor, embedded: torch.Tensor) -> torch.Tensor:
        """Per bigram position i: mean embedding of the token after every other j with the same bigram."""
        following = torch.cat([embedded[:, 2:], torch.zeros_like(embedded[:, :1])], dim=1)
        return match @ following / match.sum(dim=2, keepdim=True).clamp(min=1.0)

    @staticmethod
    def _grouped_lookup(bigrams: torch.Tensor, embedded: torch.Tensor, span: int) -> torch.Tensor:
        """:meth:`_lookup` without the (positions x positions) match matrix: each observation's
        positions grouped by bigram (ids below ``span``), a group's sum of following embeddings
        less the position's own, over the others in its group (linear in the positions; the same
        values up to rounding)."""
        following = torch.cat([embedded[:, 2:], torch.zeros_like(embedded[:, :1])], dim=1)
        rows = torch.arange(bigrams.shape[0], device=bigrams.device).unsqueeze(1)
        _, group, sizes = torch.unique(bigrams + rows * span, return_inverse=True, return_counts=True)
        width = following.shape[-1]
        sums = following.new_zeros(sizes.numel(), width)
        sums = sums.index_add(0, group.flatten(), following.reshape(-1, width))
        others = (sizes[group] - 1).clamp(min=1).unsqueeze(-1)
        return (sums[group] - following) / others


def _token_defaults(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The token policies' defaults: :class:`TokenFeaturesExtractor`, and for its
    ``"flatten-small"`` encoder one 64-unit hidden layer per head (SB3's default is two)."""
    kwargs.setdefault("features_extractor_class", TokenFeaturesExtractor)
    encoder = (kwargs.get("features_extractor_kwargs") or {}).get("encoder")
    if kwargs["features_extractor_class"] is TokenFeaturesExtractor and encoder == "flatten-small":
        kwargs.setdefault("net_arch", [64])
    return kwargs


class TokenPolicy(MultiInputActorCriticPolicy):
    """``MultiInputPolicy`` with :class:`TokenFeaturesExtractor`, for SB3 PPO and A2C.

    With ``policy_kwargs={"features_extractor_kwargs": {"encoder": "flatten-small"}}`` the heads
    default to one 64-unit hidden layer each (``net_arch=[64]``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **_token_defaults(kwargs))


def _maskable_policy_class() -> type:
    try:
        from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
    except ImportError as error:  # pragma: no cover - sb3-contrib is a dependency
        raise ImportError("MaskableTokenPolicy needs sb3-contrib: pip install sb3-contrib") from error

    class MaskableTokenPolicy(MaskableMultiInputActorCriticPolicy):
        """sb3-contrib ``MaskableMultiInputPolicy`` with :class:`TokenFeaturesExtractor`.

        MaskablePPO reads the mask from the env's ``action_masks()``.
        """

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **_token_defaults(kwargs))

    return MaskableTokenPolicy


MaskableTokenPolicy = _maskable_policy_class()
"""sb3-contrib's ``MaskableMultiInputPolicy`` with :class:`TokenFeaturesExtractor` (and the token
policies' defaults): ``MaskablePPO(MaskableTokenPolicy, env)``; MaskablePPO reads the mask from
the env's ``action_masks()``."""
