"""The paper's per-step advantages for multi-turn text rollouts, in numpy (no torch, no TRL).

A TRL rollout is one completion: the model's turns, each followed by the results of the tool
calls it made (``tool_mask`` is 1 on the model's tokens, 0 on the tool results). Turn k of
rollout i gets the integrated reward ``R_ik = O_i + lam * mean(votes)`` over the judge's votes
on the env steps that turn made (:func:`turn_rewards`); within a group of rollouts of one task,
``R_ik`` is z-scored across the rollouts that have a turn k (:func:`rla_gym.stats.group_advantages`),
and every token of turn k carries that advantage (:func:`token_advantages`).

Examples:
    >>> mask = np.array([[1, 1, 0, 0, 1, 1], [1, 0, 1, 1, 1, 1]])
    >>> token_turns(mask).tolist()
    [[0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 1, 1]]
    >>> token_advantages(mask, [np.array([1.0, -1.0]), np.array([0.5])]).tolist()
    [[1.0, 1.0, 0.0, 0.0, -1.0, -1.0], [0.5, 0.0, 0.0, 0.0, 0.0, 0.0]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: One logged call of the act tool: the text it returned, and the index of the env step it ran (None if none).
Call = tuple[str, int | None]


def turn_steps(completion: Sequence[Mapping[str, Any]], calls: Sequence[Call]) -> list[list[int]]:
    """The env steps that each model turn of one completion ran.

    ``completion`` is TRL's message list for a rollout (assistant turns, each followed by the
    results of its tool calls); ``calls`` is the environment's log of the act calls it ran, in
    order. Tool results are matched to logged calls in order: a result that is not the next
    logged call's text (a call TRL could not make, which it reports as an error) ran no step.
    Calls whose results TRL dropped (over the length limit) come last and belong to no turn.

    Examples:
        >>> completion = [{"role": "assistant"}, {"role": "tool", "content": "a"},
        ...               {"role": "tool", "content": "{'error': 'bad argument'}"},
        ...               {"role": "assistant"}, {"role": "tool", "content": "over"},
        ...               {"role": "assistant"}]
        >>> turn_steps(completion, [("a", 0), ("over", None)])
        [[0], [], []]
    """
    turns: list[list[int]] = []
    pending = 0
    for message in completion:
        if message.get("role") == "assistant":
            turns.append([])
        elif message.get("role") == "tool" and pending < len(calls):
            text, step = calls[pending]
            if message.get("content") != text:
                continue  # a call TRL could not make: it ran nothing
            if step is not None and turns:
                turns[-1].append(step)
            pending += 1
    return turns


def turn_rewards(outcome: int, votes: Any, steps: Sequence[Sequence[int]], lam: float = 1.0) -> np.ndarray:
    """``R_k = outcome + lam * mean(votes of the steps turn k ran)``; a turn that ran no step, or
    ``votes=None`` (no judge), gets the outcome alone. ``votes`` has shape (env steps, m).

    Examples:
        >>> turn_rewards(1, [[1, 1, -1], [-1, 0, -1]], [[0], [1], []], lam=1.0).round(3).tolist()
        [1.333, 0.333, 1.0]
    """
    if outcome not in (1, -1):
        raise ValueError(f"outcome must be +1 or -1, got {outcome!r}")
    rewards = np.full(len(steps), float(outcome))
    if votes is None:
        return rewards
    v = np.asarray(votes, dtype=np.float64)
    if v.ndim != 2 or not np.isin(v, (-1.0, 0.0, 1.0)).all():
        raise ValueError(f"votes must have shape (steps, m) with values in {{-1, 0, 1}}, got {v!r}")
    for k, turn in enumerate(steps):
        if turn:
            rewards[k] += lam * v[list(turn)].mean()
    return rewards


def token_turns(tool_mask: Any) -> np.ndarray:
    """Each completion token's turn index: the number of 0 -> 1 edges of ``tool_mask`` (B, T) before it."""
    mask = np.asarray(tool_mask)
    if mask.ndim != 2:
        raise ValueError(f"tool_mask must have shape (B, T), got {mask.shape}")
    edges = (mask[:, 1:] == 1) & (mask[:, :-1] == 0)
    return np.concatenate([np.zeros((mask.shape[0], 1), dtype=np.int64), np.cumsum(edges, axis=1)], axis=1)


def token_advantages(tool_mask: Any, advantages: Sequence[np.ndarray]) -> np.ndarray:
    """(B, T) advantages: each model token (``tool_mask`` 1) carries its turn's advantage,
    tool results and turns without an advantage 0."""
    mask = np.asarray(tool_mask)
    turns = token_turns(mask)
    if len(advantages) != mask.shape[0]:
        raise ValueError(f"{len(advantages)} advantage arrays for {mask.shape[0]} completions")
    out = np.zeros(mask.shape, dtype=np.float64)
    for b, per_turn in enumerate(advantages):
        per_turn = np.asarray(per_turn, dtype=np.float64)
        known = (turns[b] < len(per_turn)) & (mask[b] == 1)
        out[b, known] = per_turn[turns[b, known]]
    return out
