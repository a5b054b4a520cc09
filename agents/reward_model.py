"""The process reward model (PRM): m stochastic +1/-1 votes per step, trained from outcomes only.

A step is (observation tokens, action, next observation tokens). ``ProcessRewardModel``
gives each step a vote logit; ``PRMTrainer`` fits it with one of the objectives below; the
exact ``progress`` labels of the env are used by :func:`evaluate_prm` only.

Objectives (``OBJECTIVES``):

- ``consistency``: the paper's. Vote j on step i earns R_i * S_ij with
  R_i = O + (lambda / m) sum_j S_ij; its advantage is the z-score over the m votes of the step
  (steps whose votes all agree are skipped); policy gradient on the vote log-probabilities;
  only tasks whose success rate lies in ``success_band`` (0.2, 0.8) feed it.
- ``consistency-balanced``: the same, with each trajectory's steps weighted 1/T and
  successful and failed trajectories weighted equally.
- ``regression``: the mean step score of a trajectory regressed onto its outcome (MSE).
- ``value-difference`` (ours): a value head V(s) regressed onto the outcome from every state
  of a trajectory; a step's logit is ``kappa * (V(s') - V(s))``, which separates "made
  progress" from "was already near the goal". The temperature kappa is fitted by the
  regression loss on the (detached) value differences, so vote confidence is calibrated.

Every objective shares one structural rule, the paper's judge criterion "concrete progress
that is not a no-op": a step whose next observation equals its observation gets the fixed
logit ``noop_logit`` (votes -1 with probability 0.98 at the default -4).
- ``supervised``: binary cross-entropy on the exact labels. An upper bound for the docs:
  it uses the oracle and never runs in the loop.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.trajectories import Trajectory, success_groups, task_success_rates
from rla_gym.stats import vote_statistics

OBJECTIVES = ("consistency", "consistency-balanced", "regression", "value-difference", "supervised")
#: Objectives that may train the PRM inside the loop (outcomes only).
OUTCOME_OBJECTIVES = OBJECTIVES[:4]


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"``: CUDA when available, else the CPU. A CUDA device without an index gets the
    current one's, so that threads working on the model (``BatchedPPO.beside_update``) use the
    device it was placed on, whatever their own current device."""
    resolved = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)
    if resolved.type == "cuda" and resolved.index is None and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return resolved


class ProcessRewardModel(nn.Module):
    """Scores steps (obs tokens, action, next obs tokens) with a vote logit: P(vote = +1) = sigmoid(logit).

    Examples:
        >>> import gymnasium as gym, rla_gym
        >>> prm = ProcessRewardModel.for_env(gym.make("RLA-TextNav-v0"), seed=0)
        >>> steps = {"obs": torch.zeros(5, 69, dtype=torch.long), "action": torch.zeros(5, dtype=torch.long),
        ...          "next_obs": torch.zeros(5, 69, dtype=torch.long)}
        >>> prm.votes(steps, m=3).shape, float(prm.score(steps).abs().max()) <= 1
        (torch.Size([5, 3]), True)
    """

    def __init__(
        self,
        vocab_size: int,
        token_length: int,
        n_actions: int,
        *,
        embed_dim: int = 16,
        hidden: int = 128,
        head: str = "step",
        value_temperature: float = 5.0,
        noop_logit: float | None = -4.0,
        device: str | torch.device = "auto",
        seed: int | None = None,
    ) -> None:
        super().__init__()
        if head not in ("step", "value"):
            raise ValueError(f"head must be 'step' or 'value', got {head!r}")
        sizes = {"vocab_size": vocab_size, "token_length": token_length, "n_actions": n_actions,
                 "embed_dim": embed_dim, "hidden": hidden}  # fmt: skip
        for name, size in sizes.items():
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {size!r}")
        if not (_finite_number(value_temperature) and value_temperature > 0):
            raise ValueError(f"value_temperature must be a finite number > 0, got {value_temperature!r}")
        if noop_logit is not None and not _finite_number(noop_logit):
            raise ValueError(f"noop_logit must be a finite number or None, got {noop_logit!r}")
        if seed is not None:
            torch.manual_seed(seed)
        self.config = {
            "vocab_size": vocab_size, "token_length": token_length, "n_actions": n_actions,
            "embed_dim": embed_dim, "hidden": hidden, "head": head, "value_temperature": value_temperature,
            "noop_logit": noop_logit,
        }  # fmt: skip
        self.head = head
        self.noop_logit = noop_logit
        self.log_temperature = nn.Parameter(torch.tensor(math.log(value_temperature)))
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.action_embedding = nn.Embedding(n_actions, embed_dim)
        width = token_length * embed_dim
        self.step_net = nn.Sequential(
            nn.Linear(2 * width + embed_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )
        self.value_net = nn.Sequential(
            nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )
        self.device = resolve_device(device)
        self.to(self.device)
        self._numpy_cache: tuple[tuple[tuple[int, int, int], ...], dict[str, Any]] | None = None

    @classmethod
    def for_env(cls, env: Any, **kwargs: Any) -> ProcessRewardModel:
        """A PRM sized for an rla-gym env's token observations and commands."""
        base = env.unwrapped
        return cls(len(base.vocab), base.token_length, len(base.action_names), **kwargs)

    def _encode(self, tokens: torch.Tensor) -> torch.Tensor:
        from agents.policies import gather_rows  # the embedding lookup with a fast CPU backward

        return gather_rows(self.embedding.weight, tokens.long().flatten()).view(len(tokens), -1)

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """V(s) in [-1, 1] (the value head; trained by ``value-difference``)."""
        return torch.tanh(self.value_net(self._encode(obs)).squeeze(-1))

    def logits(self, steps: dict[str, torch.Tensor], *, detach_values: bool = False) -> torch.Tensor:
        """One vote logit per step (no-op steps get ``noop_logit``)."""
        return self._logits_and_next_values(steps, detach_values)[0]

    def _logits_and_next_values(
        self, steps: dict[str, torch.Tensor], detach_values: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        next_values = None
        if self.head == "value":
            values, next_values = self.value_pairs(steps)
            raw = self._value_logits(values, next_values, detach_values)
        else:
            features = torch.cat(
                [
                    self._encode(steps["obs"]),
                    self.action_embedding(steps["action"].long()),
                    self._encode(steps["next_obs"]),
                ],
                dim=1,
            )
            raw = self.step_net(features).squeeze(-1)
        return self._noop(steps, raw), next_values

    def _noop(self, steps: dict[str, torch.Tensor], raw: torch.Tensor) -> torch.Tensor:
        if self.noop_logit is None:
            return raw
        unchanged = rows_equal(steps["obs"], steps["next_obs"])
        return torch.where(unchanged, torch.full_like(raw, self.noop_logit), raw)

    def _value_logits(self, values: torch.Tensor, next_values: torch.Tensor, detach: bool) -> torch.Tensor:
        difference = next_values - values
        return self.log_temperature.exp() * (difference.detach() if detach else difference)

    def value_pairs(self, steps: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """V(s) and V(s') of every step, from one forward pass over the distinct states.

        Steps of a trajectory chain (a step's ``next_obs`` is the next step's ``obs``), so a
        chained ``next_obs`` takes the value already computed for that ``obs``; rows that do
        not chain add their ``next_obs``. Of those states each distinct one is valued once
        (no-op steps repeat their state: in TextNav rollouts about a quarter of the states are
        distinct). The values are those of :meth:`values` either way, and so are the gradients
        (a repeated state's terms are summed).
        """
        obs, next_obs = steps["obs"], steps["next_obs"]
        n = len(obs)
        chained = np.zeros(n, dtype=bool)
        if n > 1:
            chained[:-1] = rows_equal(next_obs[:-1], obs[1:]).cpu().numpy()
        loose, source = (torch.from_numpy(a).to(obs.device) for a in chain_index(chained))
        states = torch.cat([obs, next_obs.index_select(0, loose)])
        if states.device.type == "cpu":
            index, inverse = (torch.from_numpy(a) for a in distinct_rows(states.numpy()))
            values = self.values(states.index_select(0, index)).index_select(0, inverse)
        else:
            distinct, inverse = torch.unique(states, dim=0, return_inverse=True)
            values = self.values(distinct).index_select(0, inverse)
        return values[:n], values.index_select(0, source)

    @torch.inference_mode()
    def assess(
        self, steps: dict[str, torch.Tensor], m: int = 3, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Votes (steps, m), expected votes (steps,) and outcome estimates (steps,), one forward pass.

        A step's outcome estimate is V(s') for the value head and its expected vote for the step
        head, so a trajectory's :meth:`predict_outcomes` is its last step's estimate (value head) or
        the mean of its steps' estimates (step head).
        """
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise ValueError(f"m must be an integer >= 1, got {m!r}")
        logits, next_values = self._logits_and_next_values(steps)
        p = torch.sigmoid(logits)
        draws = torch.rand((len(p), m), generator=generator, device=p.device)
        scores = 2 * p - 1
        estimates = scores if next_values is None else next_values.clamp(-1.0, 1.0)
        return torch.where(draws < p.unsqueeze(1), 1.0, -1.0), scores, estimates

    def assess_arrays(
        self, obs: np.ndarray, actions: np.ndarray, next_obs: np.ndarray, m: int = 3,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """Votes (steps, m) and outcome estimates (steps,) of :meth:`assess`, for numpy rows.

        The votes are drawn by :func:`draw_votes` from :meth:`probabilities`: on the CPU a lean
        forward pass, from the same random stream as :meth:`assess`.
        """
        if m < 1:
            raise ValueError(f"m must be >= 1, got {m}")
        p, estimates = self.probabilities(obs, actions, next_obs)
        return draw_votes(p, m, generator), estimates

    def probabilities(
        self, obs: np.ndarray, actions: np.ndarray, next_obs: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """P(vote = +1) = sigmoid(logit) and the outcome estimate of each step (as :meth:`assess`'s).

        On the CPU the forward pass is a lean one on a copy of the weights taken again whenever a
        parameter has changed in place (a plain optimiser step, ``load_state_dict``) or the copy
        was dropped (after each step of :class:`PRMTrainer`'s fused Adam): lookups, comparisons and
        the sigmoid in numpy, only the matrix products in torch (numpy's BLAS would start its
        own threads); about half of :meth:`assess`'s time on the loop's small calls. The logits
        agree with torch's up to float32 rounding.
        """
        if self.device.type != "cpu":
            steps = {
                "obs": torch.as_tensor(obs, device=self.device),
                "action": torch.as_tensor(actions, device=self.device),
                "next_obs": torch.as_tensor(next_obs, device=self.device),
            }
            with torch.inference_mode():
                logits_t, next_values_t = self._logits_and_next_values(steps)
                p_t = torch.sigmoid(logits_t)
                estimates_t = 2 * p_t - 1 if next_values_t is None else next_values_t.clamp(-1.0, 1.0)
            return p_t.cpu().numpy(), estimates_t.cpu().numpy()
        logits, next_values = self.lean_logits(obs, actions, next_obs)
        p = _sigmoid(logits)
        estimates = 2 * p - 1 if next_values is None else np.clip(next_values, -1.0, 1.0)
        return p, estimates

    def lean_logits(
        self, obs: np.ndarray, actions: np.ndarray, next_obs: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The vote logits of numpy rows and, for the value head, V(s'): the lean CPU forward
        pass of :meth:`probabilities` (no-op steps get ``noop_logit``)."""
        weights = self._numpy_weights()
        next_values = None
        if self.head == "value":
            values, next_values = self._numpy_value_pairs(weights, obs, next_obs)
            logits = weights["temperature"] * (next_values - values)
        else:
            table = weights["embedding.weight"]
            features = np.concatenate(
                [table.take(obs, axis=0).reshape(len(obs), -1),
                 weights["action_embedding.weight"].take(actions, axis=0),
                 table.take(next_obs, axis=0).reshape(len(obs), -1)], axis=1,
            )  # fmt: skip
            logits = _numpy_mlp(weights, "step_net", features)
        if self.noop_logit is not None:
            logits = np.where((obs == next_obs).all(axis=1), np.float32(self.noop_logit), logits)
        return logits, next_values

    def values_array(self, tokens: np.ndarray) -> np.ndarray:
        """V(s) in [-1, 1] of numpy token rows (the value head), lean on the CPU as :meth:`probabilities`."""
        if self.device.type != "cpu":
            with torch.inference_mode():
                return self.values(torch.as_tensor(tokens, device=self.device)).cpu().numpy()
        weights = self._numpy_weights()
        embedded = weights["embedding.weight"].take(tokens, axis=0).reshape(len(tokens), -1)
        return np.tanh(_numpy_mlp(weights, "value_net", embedded))

    def _numpy_weights(self) -> dict[str, Any]:
        """Detached copies of the parameters (embeddings as numpy arrays, layers as transposed
        tensors), taken again whenever a parameter has changed."""
        # in-place updates (plain optimiser steps, load_state_dict) bump _version and .to() moves
        # data_ptr; a fused optimiser step does neither, so PRMTrainer drops the copy after each
        # the parameters themselves too: load_state_dict(assign=True) puts new ones in
        key = tuple((id(p), p.data_ptr(), p._version) for p in self.parameters())
        if self._numpy_cache is None or self._numpy_cache[0] != key:
            unused = "step_net" if self.head == "value" else "value_net"
            copies = {
                name: p.detach().cpu().clone() for name, p in self.named_parameters() if unused not in name
            }
            weights: dict[str, Any] = {
                name: copy.numpy() if "embedding" in name or name == "log_temperature" else copy
                for name, copy in copies.items()
            }
            for name, copy in copies.items():
                if name.endswith(".weight") and "embedding" not in name:
                    weights[name] = copy.T.contiguous()
            weights["temperature"] = np.exp(weights["log_temperature"])
            self._numpy_cache = (key, weights)
        return self._numpy_cache[1]

    @staticmethod
    def _numpy_value_pairs(
        weights: dict[str, Any], obs: np.ndarray, next_obs: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`value_pairs` in numpy: each distinct state of a chain valued once."""
        n = len(obs)
        chained = np.zeros(n, dtype=bool)
        if n > 1:
            chained[:-1] = (next_obs[:-1] == obs[1:]).all(axis=1)
        loose, source = chain_index(chained)
        states = np.concatenate([obs, next_obs[loose]])
        index, inverse = distinct_rows(states)
        embedded = weights["embedding.weight"].take(states[index], axis=0).reshape(len(index), -1)
        values = np.tanh(_numpy_mlp(weights, "value_net", embedded))[inverse]
        return values[:n], values[source]

    def votes_and_scores(
        self, steps: dict[str, torch.Tensor], m: int = 3, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """m votes per step, shape (steps, m), and the expected vote per step, from one forward pass."""
        votes, scores, _ = self.assess(steps, m, generator)
        return votes, scores

    def votes(
        self, steps: dict[str, torch.Tensor], m: int = 3, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """m stochastic votes in {+1, -1} per step, shape (steps, m)."""
        return self.votes_and_scores(steps, m, generator)[0]

    @torch.no_grad()
    def score(self, steps: dict[str, torch.Tensor]) -> torch.Tensor:
        """Expected vote in [-1, 1] per step (the mean of infinitely many votes)."""
        return 2 * torch.sigmoid(self.logits(steps)) - 1

    def predict_outcome(self, trajectory: Trajectory) -> float:
        """Predicted outcome in [-1, 1] of one trajectory (see :meth:`predict_outcomes`)."""
        return float(self.predict_outcomes([trajectory])[0])

    @torch.no_grad()
    def predict_outcomes(self, trajectories: Sequence[Trajectory]) -> np.ndarray:
        """Predicted outcomes in [-1, 1]: the mean step score (step head, the paper's), or the
        value of the final state (value head: the step scores telescope to V(s_T) - V(s_0))."""
        if self.head == "value":
            final = torch.as_tensor(np.stack([t.next_obs[-1] for t in trajectories]), device=self.device)
            return self.values(final).clamp(-1.0, 1.0).cpu().numpy()
        scores = self.score(self.steps(trajectories)).cpu().numpy()
        lengths = [len(t) for t in trajectories]
        owner = np.repeat(np.arange(len(trajectories)), lengths)
        return np.bincount(owner, weights=scores, minlength=len(trajectories)) / np.array(lengths)

    def steps(self, trajectories: Sequence[Trajectory]) -> dict[str, torch.Tensor]:
        """The steps of ``trajectories`` as tensors on this model's device."""
        return {
            "obs": torch.as_tensor(np.concatenate([t.obs for t in trajectories]), device=self.device),
            "action": torch.as_tensor(np.concatenate([t.actions for t in trajectories]), device=self.device),
            "next_obs": torch.as_tensor(
                np.concatenate([t.next_obs for t in trajectories]), device=self.device
            ),
        }


def rows_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Whether each row of ``a`` equals the same row of ``b`` (on the CPU compared in numpy,
    several times faster than torch's ``eq`` on these small integer matrices)."""
    if a.device.type == "cpu":
        return torch.from_numpy((a.numpy() == b.numpy()).all(axis=1))
    return (a == b).all(dim=1)


#: Multipliers of the row hash in :func:`distinct_rows` (odd 64-bit constants).
_ROW_HASH = np.random.default_rng(20261201).integers(1, 2**62, 4096, dtype=np.int64) | 1


def chain_index(chained: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each step's next state sits among ``[obs, next_obs[loose]]`` (see ``value_pairs``).

    ``chained[i]`` says step i's ``next_obs`` is step i + 1's ``obs``. Returns ``loose`` (the
    steps that do not chain, whose ``next_obs`` is appended) and ``source`` (per step, the row of
    its next state).

    Examples:
        >>> loose, source = chain_index(np.array([True, False, True, False]))
        >>> loose.tolist(), source.tolist()
        ([1, 3], [1, 4, 3, 5])
    """
    n = len(chained)
    loose = np.flatnonzero(~chained)
    source = np.arange(1, n + 1)
    source[loose] = n + np.arange(len(loose))
    return loose, source


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of one copy of each distinct row of ``rows`` (2-D integers) and, per row, which.

    ``rows[index][inverse]`` equals ``rows``. The rows are told apart by a 64-bit hash, then
    checked: on a collision it falls back to ``np.unique(axis=0)``, so the answer is exact.

    Examples:
        >>> rows = np.array([[1, 2], [3, 4], [1, 2]])
        >>> index, inverse = distinct_rows(rows)
        >>> len(index), bool((rows[index][inverse] == rows).all()), bool(inverse[0] == inverse[2])
        (2, True, True)
    """
    width = rows.shape[1]
    if width > len(_ROW_HASH):
        _, index, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        return index, inverse.reshape(-1)
    keys = rows.astype(np.int64, copy=False) @ _ROW_HASH[:width]  # wraps modulo 2**64
    _, index, inverse = np.unique(keys, return_index=True, return_inverse=True)
    if not np.array_equal(rows.take(index[inverse], axis=0), rows):
        _, index, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    return index, inverse.reshape(-1)


def _finite_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float, np.floating, np.integer))
        and not isinstance(value, bool)
        and (math.isfinite(value))
    )


def draw_votes(p: np.ndarray, m: int, generator: torch.Generator | None = None) -> np.ndarray:
    """m votes in {+1, -1} per step, +1 with probability ``p``, as :meth:`ProcessRewardModel.assess`
    draws them (uniforms of shape (steps, m) from ``generator``, on its device)."""
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    p = np.asarray(p)
    if p.ndim != 1 or not ((p >= 0) & (p <= 1)).all():  # NaN fails both
        raise ValueError(f"p must be a 1-D array of probabilities in [0, 1], got {p!r}")
    device = generator.device if generator is not None else "cpu"
    draws = torch.rand((len(p), m), generator=generator, device=device).cpu().numpy()
    return np.where(draws < p[:, None], np.float32(1.0), np.float32(-1.0))


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    """P(vote = +1) of numpy logits."""
    with np.errstate(over="ignore"):  # exp(-logit) = inf for logit << 0: p = 0, as it should be
        return 1.0 / (1.0 + np.exp(-logits))


def _numpy_mlp(weights: dict[str, Any], name: str, x: np.ndarray) -> np.ndarray:
    """The PRM's three-layer ReLU MLP ``name`` (``step_net`` or ``value_net``), one output, on
    numpy rows with the cached transposed weights of :meth:`ProcessRewardModel._numpy_weights`."""
    h = torch.from_numpy(x)
    for layer in (0, 2):
        h = torch.addmm(weights[f"{name}.{layer}.bias"], h, weights[f"{name}.{layer}.weight"]).relu_()
    return torch.addmm(weights[f"{name}.4.bias"], h, weights[f"{name}.4.weight"]).numpy()[:, 0]


class PRMTrainer:
    """Fits a :class:`ProcessRewardModel` with one objective; :meth:`update` is one pass over a batch."""

    def __init__(
        self,
        prm: ProcessRewardModel,
        objective: str = "regression",
        *,
        lr: float = 1e-3,
        lam: float = 1.0,
        m: int = 3,
        success_band: tuple[float, float] = (0.2, 0.8),
        minibatch_trajectories: int = 64,
        seed: int = 0,
    ) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        if objective == "value-difference" and prm.head != "value":
            raise ValueError("objective 'value-difference' needs ProcessRewardModel(head='value')")
        if isinstance(lam, bool) or not (
            isinstance(lam, (int, float, np.floating, np.integer)) and math.isfinite(lam) and lam >= 0
        ):
            raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise ValueError(f"m must be an integer >= 1, got {m!r}")
        m = int(m)
        if objective.startswith("consistency") and m < 2:
            raise ValueError(
                f"objective {objective!r} needs m >= 2 votes (one vote is always unanimous), got {m}"
            )
        self.prm, self.objective, self.lam, self.m = prm, objective, float(lam), m
        if not (isinstance(success_band, (tuple, list)) and len(success_band) == 2):
            raise ValueError(f"success_band must be a (low, high) pair, got {success_band!r}")
        low, high = success_band
        if not (_finite_number(low) and _finite_number(high) and 0 <= low <= high <= 1):
            raise ValueError(
                f"success_band must be (low, high) with 0 <= low <= high <= 1, got {success_band!r}"
            )
        mb = minibatch_trajectories
        if isinstance(mb, bool) or not isinstance(mb, int) or mb < 1:
            raise ValueError(f"minibatch_trajectories must be an integer >= 1, got {mb!r}")
        self.success_band = (float(low), float(high))
        self.minibatch = minibatch_trajectories
        # fused where it can be (Adam's update up to float rounding, in fewer kernels): a fused
        # step leaves the parameters' _version as it was, so every step of this optimizer (in
        # update() or by a caller) drops the PRM's lean copy of the weights
        fused = prm.device.type in ("cpu", "cuda")
        self.optimizer = torch.optim.Adam(prm.parameters(), lr=lr, fused=fused)
        self.optimizer.register_step_post_hook(lambda *_: setattr(prm, "_numpy_cache", None))
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator(device=prm.device).manual_seed(seed)

    def update(self, trajectories: Sequence[Trajectory], epochs: int = 1) -> dict[str, float]:
        """Train on ``trajectories`` for ``epochs`` passes in shuffled minibatches; returns the mean
        loss (NaN when none is usable, e.g. no task inside a consistency objective's band)."""
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}")
        usable = self._filter(trajectories)
        if not usable:
            return {"loss": float("nan"), "trajectories": 0.0}
        losses = []
        for _ in range(epochs):
            order = self.rng.permutation(len(usable))
            for start in range(0, len(order), self.minibatch):
                batch = [usable[i] for i in order[start : start + self.minibatch]]
                loss = self._loss(batch)
                if loss is None:
                    continue
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()  # its post-hook drops the PRM's lean copy of the weights
                losses.append(float(loss.detach()))
        return {
            "loss": float(np.mean(losses)) if losses else float("nan"),
            "trajectories": float(len(usable)),
        }

    def _filter(self, trajectories: Sequence[Trajectory]) -> list[Trajectory]:
        if not self.objective.startswith("consistency"):
            return list(trajectories)
        low, high = self.success_band
        rates = task_success_rates(trajectories)
        keys = success_groups(trajectories)
        return [t for t, key in zip(trajectories, keys, strict=True) if low <= rates[key] <= high]

    def _loss(self, batch: list[Trajectory]) -> torch.Tensor | None:
        prm = self.prm
        steps = prm.steps(batch)
        lengths = torch.as_tensor([len(t) for t in batch], device=prm.device)
        outcomes = torch.as_tensor([float(t.outcome) for t in batch], device=prm.device)
        owner = torch.repeat_interleave(torch.arange(len(batch), device=prm.device), lengths)
        if self.objective == "supervised":
            labels = torch.as_tensor(np.concatenate([t.labels for t in batch]) > 0, device=prm.device).float()
            return nn.functional.binary_cross_entropy_with_logits(prm.logits(steps), labels)
        if self.objective == "value-difference":
            # one pass values every state and each trajectory's final state
            values, next_values = prm.value_pairs(steps)
            last = torch.cumsum(lengths, 0) - 1
            predicted = torch.cat([values, next_values[last]])
            targets = torch.cat([outcomes[owner], outcomes])
            value_loss = ((predicted - targets) ** 2).mean()
            # the temperature alone is fitted by regression on the detached value differences
            logits = prm._noop(steps, prm._value_logits(values, next_values, detach=True))
            return value_loss + self._regression(logits, owner, lengths, outcomes)
        logits = prm.logits(steps)
        if self.objective == "regression":
            return self._regression(logits, owner, lengths, outcomes)
        return self._consistency_loss(logits, outcomes[owner], lengths, owner, outcomes)

    @staticmethod
    def _regression(
        logits: torch.Tensor, owner: torch.Tensor, lengths: torch.Tensor, outcomes: torch.Tensor
    ) -> torch.Tensor:
        """MSE of each trajectory's mean step score against its outcome."""
        scores = 2 * torch.sigmoid(logits) - 1
        mean = torch.zeros(len(outcomes), device=logits.device, dtype=scores.dtype).index_add(
            0, owner, scores
        )
        mean = mean / lengths
        return ((mean - outcomes) ** 2).mean()

    def _consistency_loss(
        self, logits: torch.Tensor, step_outcome: torch.Tensor, lengths: torch.Tensor, owner: torch.Tensor,
        outcomes: torch.Tensor,
    ) -> torch.Tensor | None:  # fmt: skip
        m = self.m
        with torch.no_grad():
            p = torch.sigmoid(logits).unsqueeze(1).expand(-1, m)
            votes = torch.where(torch.rand(p.shape, generator=self.generator, device=p.device) < p, 1.0, -1.0)
            integrated = step_outcome + self.lam * votes.mean(dim=1)  # R_i = O + (lambda/m) sum_j S_ij
            rewards = integrated.unsqueeze(1) * votes  # vote j earns R_i * S_ij
            std = rewards.std(dim=1, unbiased=False, keepdim=True)
            mixed = (std > 0).squeeze(1)  # unanimous votes give zero advantage: skipped
            advantages = (rewards - rewards.mean(dim=1, keepdim=True)) / std.clamp(min=1e-8)
            weights = consistency_weights(
                lengths, owner, outcomes, mixed, self.objective == "consistency-balanced"
            )
        if weights.sum() == 0:
            return None
        log_p = nn.functional.logsigmoid(torch.where(votes > 0, 1.0, -1.0) * logits.unsqueeze(1))
        return -(weights.unsqueeze(1) * advantages * log_p).sum() / (weights.sum() * m)


def consistency_weights(
    lengths: torch.Tensor, owner: torch.Tensor, outcomes: torch.Tensor, mixed: torch.Tensor, balanced: bool
) -> torch.Tensor:
    """Per-step weights of the consistency objectives; steps with unanimous votes weigh 0.

    Balanced: each step weighs 1/T of its trajectory, then successful and failed trajectories
    are scaled to equal total weight over the steps that remain (after unanimous ones drop out).

    Examples:
        >>> w = consistency_weights(torch.tensor([2, 4]), torch.tensor([0, 0, 1, 1, 1, 1]),
        ...                         torch.tensor([1.0, -1.0]), torch.tensor([1, 0, 1, 1, 0, 1]).bool(), True)
        >>> w.tolist()
        [1.0, 0.0, 0.3333333432674408, 0.3333333432674408, 0.0, 0.3333333432674408]
    """
    weights = mixed.float()
    if not balanced:
        return weights
    weights = weights / lengths[owner].float()
    wins = (outcomes > 0)[owner]
    for group in (wins, ~wins):
        total = weights[group].sum()
        if total > 0:
            weights[group] = weights[group] / total
    return weights


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties counted half). NaN with only one class."""
    scores, positive = np.asarray(scores, dtype=np.float64), np.asarray(labels) > 0
    if scores.ndim != 1 or scores.shape != positive.shape:
        raise ValueError(
            f"scores and labels must be 1-D and as long, got shapes {scores.shape} and {positive.shape}"
        )
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    average = first + (counts + 1) / 2.0  # 1-based average rank of each tie group
    ranks[order] = np.repeat(average, counts)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate_prm(
    prm: ProcessRewardModel,
    trajectories: Sequence[Trajectory],
    *,
    m: int = 3,
    seed: int = 0,
    warn: bool = True,
) -> dict[str, float]:
    """Process accuracy, balanced accuracy and AUC against the exact labels; outcome accuracy;
    p+, p-, mu of sampled votes; and the collapse detector (share of +1 votes, unanimous steps),
    which with the no-op rule looks only at steps that changed the observation."""
    return prm_diagnostics(prm, trajectories, m=m, seed=seed, warn=warn)[0]


@torch.no_grad()
def prm_diagnostics(
    prm: ProcessRewardModel,
    trajectories: Sequence[Trajectory],
    *,
    m: int = 3,
    seed: int = 0,
    warn: bool = True,
) -> tuple[dict[str, float], np.ndarray]:
    """:func:`evaluate_prm`'s metrics and, from the same forward pass, each trajectory's
    predicted outcome (:meth:`ProcessRewardModel.predict_outcomes`)."""
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    if not trajectories:
        raise ValueError("the PRM's diagnostics need at least one trajectory, got none")
    if prm.device.type == "cpu":  # the lean forward pass (probabilities'), in numpy
        obs, actions, next_obs = (np.concatenate([getattr(t, k) for t in trajectories])
                                  for k in ("obs", "actions", "next_obs"))  # fmt: skip
        logits, next_values = prm.lean_logits(obs, actions, next_obs)
        unchanged = (obs == next_obs).all(axis=1)
    else:
        steps = prm.steps(trajectories)
        logits_t, next_values_t = prm._logits_and_next_values(steps)  # the one forward pass
        logits = logits_t.cpu().numpy()
        next_values = None if next_values_t is None else next_values_t.cpu().numpy()
        unchanged = rows_equal(steps["obs"], steps["next_obs"]).cpu().numpy()
    p = _sigmoid(logits.astype(np.float32))
    labels = np.concatenate([t.labels for t in trajectories])
    positive = labels > 0
    predicted = logits > 0
    tpr = float(predicted[positive].mean()) if positive.any() else float("nan")
    tnr = float((~predicted[~positive]).mean()) if (~positive).any() else float("nan")
    owner = np.repeat(np.arange(len(trajectories)), [len(t) for t in trajectories])
    lengths = np.array([len(t) for t in trajectories])
    if next_values is None:  # the step head: the mean step score (as predict_outcomes)
        predicted_outcome = np.bincount(owner, weights=2 * p - 1, minlength=len(trajectories)) / lengths
    else:  # the value head: V of the final state
        predicted_outcome = np.clip(next_values[np.cumsum(lengths) - 1], -1.0, 1.0)
    outcomes = np.array([t.outcome for t in trajectories])
    # m votes per step, drawn as ProcessRewardModel.assess draws them
    generator = torch.Generator(device=prm.device).manual_seed(seed)
    draws = torch.rand((len(p), m), generator=generator, device=prm.device).cpu().numpy()
    votes = np.where(draws < p[:, None], np.float32(1.0), np.float32(-1.0))
    stats = vote_statistics(votes, outcomes[owner])
    # with the no-op rule, no-ops vote -1 by construction: judge collapse on the other steps
    learned = ~unchanged if prm.noop_logit is not None else np.ones(len(votes), dtype=bool)
    judged = votes[learned] if learned.any() else votes
    share_plus = float((judged > 0).mean())
    unanimous = float((np.abs(judged.sum(axis=1)) == m).mean())
    collapsed = share_plus < 0.05 or share_plus > 0.95
    if collapsed and warn:
        warnings.warn(
            f"PRM votes collapsed: {share_plus:.1%} of votes are +1 ({unanimous:.1%} of steps unanimous)",
            RuntimeWarning,
            stacklevel=2,
        )
    metrics = {
        "process_accuracy": float((predicted == positive).mean()),
        "balanced_accuracy": (tpr + tnr) / 2,
        "auc": auc(logits, labels),
        "outcome_accuracy": float(((predicted_outcome > 0) == (outcomes > 0)).mean()),
        **stats,
        "vote_plus_share": share_plus,
        "unanimous_share": unanimous,
        "collapsed": float(collapsed),
    }
    return metrics, predicted_outcome
