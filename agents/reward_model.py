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
    """``"auto"``: CUDA when available, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


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
        unchanged = (steps["obs"] == steps["next_obs"]).all(dim=1)
        return torch.where(unchanged, torch.full_like(raw, self.noop_logit), raw)

    def _value_logits(self, values: torch.Tensor, next_values: torch.Tensor, detach: bool) -> torch.Tensor:
        difference = next_values - values
        return self.log_temperature.exp() * (difference.detach() if detach else difference)

    def value_pairs(self, steps: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """V(s) and V(s') of every step, from one forward pass over the distinct states.

        Steps of a trajectory chain (a step's ``next_obs`` is the next step's ``obs``), so a
        chained ``next_obs`` takes the value already computed for that ``obs``: about half the
        work of valuing both sides. Rows that do not chain are valued on their own; the values
        are those of :meth:`values` either way.
        """
        obs, next_obs = steps["obs"], steps["next_obs"]
        n = len(obs)
        chained = torch.zeros(n, dtype=torch.bool, device=obs.device)
        if n > 1:
            chained[:-1] = (next_obs[:-1] == obs[1:]).all(dim=1)
        loose = torch.nonzero(~chained).squeeze(1)
        values = self.values(torch.cat([obs, next_obs[loose]]))
        source = torch.arange(1, n + 1, device=obs.device)
        source[loose] = n + torch.arange(len(loose), device=obs.device)
        return values[:n], values[source]

    @torch.inference_mode()
    def assess(
        self, steps: dict[str, torch.Tensor], m: int = 3, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Votes (steps, m), expected votes (steps,) and outcome estimates (steps,), one forward pass.

        A step's outcome estimate is V(s') for the value head and its expected vote for the step
        head, so a trajectory's :meth:`predict_outcomes` is its last step's estimate (value head) or
        the mean of its steps' estimates (step head).
        """
        if m < 1:
            raise ValueError(f"m must be >= 1, got {m}")
        logits, next_values = self._logits_and_next_values(steps)
        p = torch.sigmoid(logits)
        draws = torch.rand((len(p), m), generator=generator, device=p.device)
        scores = 2 * p - 1
        estimates = scores if next_values is None else next_values.clamp(-1.0, 1.0)
        return torch.where(draws < p.unsqueeze(1), 1.0, -1.0), scores, estimates

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
        if not (isinstance(lam, (int, float)) and math.isfinite(lam) and lam >= 0):
            raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"m must be an integer >= 1, got {m!r}")
        if objective.startswith("consistency") and m < 2:
            raise ValueError(
                f"objective {objective!r} needs m >= 2 votes (one vote is always unanimous), got {m}"
            )
        self.prm, self.objective, self.lam, self.m = prm, objective, float(lam), m
        self.success_band = success_band
        self.minibatch = minibatch_trajectories
        self.optimizer = torch.optim.Adam(prm.parameters(), lr=lr)
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator(device=prm.device).manual_seed(seed)

    def update(self, trajectories: Sequence[Trajectory], epochs: int = 1) -> dict[str, float]:
        """Train on ``trajectories`` for ``epochs`` passes in shuffled minibatches; returns the mean loss."""
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
                self.optimizer.step()
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
        mean = torch.zeros(len(outcomes), device=logits.device).index_add(0, owner, scores) / lengths
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


@torch.no_grad()
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
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    steps = prm.steps(trajectories)
    logits_t, next_values = prm._logits_and_next_values(steps)  # the one forward pass
    logits = logits_t.cpu().numpy()
    labels = np.concatenate([t.labels for t in trajectories])
    positive = labels > 0
    predicted = logits > 0
    tpr = float(predicted[positive].mean()) if positive.any() else float("nan")
    tnr = float((~predicted[~positive]).mean()) if (~positive).any() else float("nan")
    owner = np.repeat(np.arange(len(trajectories)), [len(t) for t in trajectories])
    lengths = np.array([len(t) for t in trajectories])
    if next_values is None:  # the step head: the mean step score (as predict_outcomes)
        scores = (2 * torch.sigmoid(logits_t) - 1).cpu().numpy()
        predicted_outcome = np.bincount(owner, weights=scores, minlength=len(trajectories)) / lengths
    else:  # the value head: V of the final state
        predicted_outcome = next_values[np.cumsum(lengths) - 1].clamp(-1.0, 1.0).cpu().numpy()
    outcomes = np.array([t.outcome for t in trajectories])
    # m votes per step, drawn as ProcessRewardModel.assess draws them
    generator = torch.Generator(device=prm.device).manual_seed(seed)
    p = torch.sigmoid(logits_t)
    draws = torch.rand((len(p), m), generator=generator, device=p.device)
    votes = torch.where(draws < p.unsqueeze(1), 1.0, -1.0).cpu().numpy()
    stats = vote_statistics(votes, outcomes[owner])
    # with the no-op rule, no-ops vote -1 by construction: judge collapse on the other steps
    learned = np.ones(len(votes), dtype=bool)
    if prm.noop_logit is not None:
        learned = ~(steps["obs"] == steps["next_obs"]).all(dim=1).cpu().numpy()
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
    return {
        "process_accuracy": float((predicted == positive).mean()),
        "balanced_accuracy": (tpr + tnr) / 2,
        "auc": auc(logits, labels),
        "outcome_accuracy": float(((predicted_outcome > 0) == (outcomes > 0)).mean()),
        **stats,
        "vote_plus_share": share_plus,
        "unanimous_share": unanimous,
        "collapsed": float(collapsed),
    }
