"""An LLM judge as the process reward model of a text episode: m votes of +1 / -1 per step.

The judge follows the authors' (``sample/alfworld_rl_rollout.py`` of Open-AgentRL): for one
step it reads the agent's prompt, its reply and the next observation, weighs three criteria
(the command is appropriate, the reasoning coherent, the chosen command valid and consistent
with the next observation), thinks, and writes 1 or -1 in ``\\boxed{}``. Each step is asked
``m`` times (3) at temperature 0.8, and each reply is parsed by :func:`parse_vote`: 1, -1,
or 0 when there is no usable box.

What an unparsable vote counts for is ``unparsable``:

- ``"zero"`` (the authors'): the vote is 0, so it pulls the step score toward 0;
- ``"negative"``: the vote is -1, an unusable judgement counts against the step;
- ``"skip"``: the vote is 0 and left out of the step score (a step with no usable vote scores 0).

A step's score is the mean of its counted votes, in [-1, 1]; an episode's predicted outcome is
the mean step score (the paper's step-head prediction). :meth:`LLMJudge.statistics` gives p+,
p- and mu (:func:`rla_gym.stats.vote_statistics`, over the votes that are +1 or -1), the error
balance the rm-balance curriculum reads (:func:`rla_gym.stats.error_statistics`), the outcome
accuracy and the share of unparsable votes.

Examples:
    >>> from agents.llm.backends import ScriptedBackend
    >>> judge = LLMJudge(ScriptedBackend(["\\\\boxed{1}", "\\\\boxed{-1}", "no box"]), m=3)
    >>> judge.votes([("Goal: ...", "\\\\boxed{2}", "You see a door.")])
    array([[ 1, -1,  0]])
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.llm.backends import Backend, Message
from rla_gym.llm import TextEpisode, Turn
from rla_gym.stats import error_statistics, precision_bound, vote_statistics

#: What an unparsable vote counts for (see the module doc).
UNPARSABLE = ("zero", "negative", "skip")

JUDGE_INSTRUCTION = (
    "You judge one step of an agent acting in a text environment. You are given the agent's "
    "prompt (its observation and the numbered commands it could choose), its reply (its reasoning "
    "and the command it chose) and the environment's next observation after that command ran.\n"
    "Score 1 only if all of these hold:\n"
    "(a) the chosen command suits the observation and the goal: it explores sensibly, makes "
    "progress or completes the task;\n"
    "(b) the reasoning is present, relevant and not self-contradictory, and invents no objects or "
    "places;\n"
    "(c) the chosen command is one of the listed commands, and the next observation is consistent "
    "with it.\n"
    "Otherwise score -1, for example: no reasoning, a command that is not listed, an irrelevant "
    "step, undoing progress, invented or contradictory reasoning, or a next observation that "
    "contradicts the command.\n"
    "Think first, then put the final score, 1 or -1, in \\boxed{}."
)

_MINUS = str.maketrans({"\u2212": "-", "\u2013": "-"})
#: A step to judge: a :class:`rla_gym.llm.Turn`, or (agent's prompt, its reply, next observation).
JudgedStep = Turn | tuple[str, str, str]


def final_box(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (nested braces kept), or None without a closed one.

    Examples:
        >>> final_box("first \\\\boxed{-1}, finally \\\\boxed{\\\\text{1}}")
        '\\\\text{1}'
    """
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    for end in range(start + len("\\boxed{"), len(text)):
        if text[end] == "{":
            depth += 1
        elif text[end] == "}":
            if depth == 0:
                return text[start + len("\\boxed{") : end]
            depth -= 1
    return None


def parse_vote(text: str) -> int:
    """A judge reply's vote as the authors parse it: 1, -1, or 0 (no usable box).

    The last box counts. Inside it, ``1``, ``+1`` or ``-1`` (any dash) is the vote; a fraction
    such as ``1/8`` is unusable; otherwise the box must hold exactly one integer that is 1 or -1
    (other numbers, say a step index, may stand beside it).

    Examples:
        >>> [parse_vote(t) for t in ["\\\\boxed{1}", "\\\\boxed{\\u22121}", "\\\\boxed{score 1 at step 4}",
        ...                          "\\\\boxed{1/8}", "\\\\boxed{1, -1}", "I think 1", "\\\\boxed{1"]]
        [1, -1, 1, 0, 0, 0, 0]
    """
    inside = final_box(text or "")
    if not inside:
        return 0
    s = inside.strip().translate(_MINUS)
    if s in ("1", "+1"):
        return 1
    if s == "-1":
        return -1
    if re.search(r"\d+\s*/\s*\d+", s):
        return 0
    signals = [int(x) for x in re.findall(r"[-+]?\d+", s) if int(x) in (-1, 1)]
    return signals[0] if len(signals) == 1 else 0


def judge_messages(step: JudgedStep) -> list[Message]:
    """The judge's chat messages for one step (the authors' layout: instruction, then the step)."""
    prompt, reply, observation = _triple(step)
    content = (
        f"{JUDGE_INSTRUCTION}\n\nAgent's prompt:\n{prompt}\n\nAgent's reply:\n{reply}\n\n"
        f"Next observation after this command:\n{observation}"
    )
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": content},
    ]


def _triple(step: JudgedStep) -> tuple[str, str, str]:
    if isinstance(step, Turn):
        return step.prompt, step.reply, step.observation
    prompt, reply, observation = step
    return str(prompt), str(reply), str(observation)


@dataclass(frozen=True)
class Judgement:
    """The judge's verdict on the steps of one episode (or any list of steps)."""

    #: Shape (steps, m): 1, -1, or what an unparsable vote counts for (0 or -1).
    votes: np.ndarray
    #: Shape (steps, m): whether each reply held a usable box.
    parsed: np.ndarray
    #: The judge's m replies per step.
    replies: list[list[str]]
    #: Whether unparsable votes are left out of the step score.
    skip_unparsable: bool = False

    @property
    def scores(self) -> np.ndarray:
        """Each step's score in [-1, 1]: the mean of its counted votes."""
        if not self.skip_unparsable:
            return self.votes.mean(axis=1) if self.votes.size else np.zeros(len(self.votes))
        counted = self.parsed.sum(axis=1)
        return np.where(counted > 0, self.votes.sum(axis=1) / np.maximum(counted, 1), 0.0)

    @property
    def outcome(self) -> float:
        """The predicted outcome in [-1, 1]: the mean step score (0.0 for no steps)."""
        return float(self.scores.mean()) if len(self.scores) else 0.0

    @property
    def unparsable_share(self) -> float:
        """The share of replies without a usable box (NaN for no steps)."""
        return float(1.0 - self.parsed.mean()) if self.parsed.size else math.nan


class LLMJudge:
    """A process reward model made of a language model behind a :class:`~agents.llm.backends.Backend`.

    Args:
        backend: generates the judge's replies.
        m: votes per step.
        temperature: sampling temperature of the votes (0.8, the authors').
        max_new_tokens: the longest reply, thinking included.
        unparsable: what an unparsable vote counts for, one of :data:`UNPARSABLE`.

    :attr:`votes_cast` and :attr:`unparsable_votes` count every vote since construction.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        m: int = 3,
        temperature: float = 0.8,
        max_new_tokens: int = 512,
        unparsable: str = "zero",
    ) -> None:
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"m must be an integer >= 1, got {m!r}")
        if unparsable not in UNPARSABLE:
            raise ValueError(f"unparsable must be one of {UNPARSABLE}, got {unparsable!r}")
        self.backend, self.m, self.temperature = backend, m, temperature
        self.max_new_tokens, self.unparsable = max_new_tokens, unparsable
        self.votes_cast = 0
        self.unparsable_votes = 0

    @property
    def unparsable_share(self) -> float:
        """The share of all votes so far without a usable box (NaN before the first)."""
        return self.unparsable_votes / self.votes_cast if self.votes_cast else math.nan

    def judge(self, steps: Sequence[JudgedStep]) -> Judgement:
        """m votes on each step, from one batched call to the backend."""
        return self.judge_episodes([steps])[0]

    def judge_episodes(self, episodes: Sequence[Sequence[JudgedStep] | TextEpisode]) -> list[Judgement]:
        """A :class:`Judgement` per episode (its turns, or a :class:`~rla_gym.llm.TextEpisode`),
        all steps asked in one backend call."""
        step_lists = [e.steps if isinstance(e, TextEpisode) else list(e) for e in episodes]
        flat = [step for steps in step_lists for step in steps]
        replies = self.backend.generate(
            [judge_messages(s) for s in flat], n=self.m, temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
        )  # fmt: skip
        if len(replies) != len(flat) or any(len(r) != self.m for r in replies):
            raise RuntimeError(
                f"the backend returned {[len(r) for r in replies]} replies, not {self.m} per step"
            )
        raw = np.array([[parse_vote(text) for text in step] for step in replies], dtype=np.int64)
        raw = raw.reshape(len(flat), self.m)
        parsed = raw != 0
        votes = np.where(parsed, raw, -1 if self.unparsable == "negative" else 0)
        self.votes_cast += raw.size
        self.unparsable_votes += int((~parsed).sum())
        judgements, start = [], 0
        for steps in step_lists:
            part = slice(start, start + len(steps))
            judgements.append(Judgement(votes[part], parsed[part], replies[part], self.unparsable == "skip"))
            start += len(steps)
        return judgements

    def votes(self, steps: Sequence[JudgedStep]) -> np.ndarray:
        """m votes per step, shape (steps, m)."""
        return self.judge(steps).votes

    def scores(self, steps: Sequence[JudgedStep]) -> np.ndarray:
        """Each step's score in [-1, 1] (the mean of its counted votes)."""
        return self.judge(steps).scores

    def predict_outcome(self, steps: Sequence[JudgedStep]) -> float:
        """The predicted outcome in [-1, 1] of one episode: its mean step score."""
        return self.judge(steps).outcome

    def predict_outcomes(self, episodes: Sequence[Sequence[JudgedStep] | TextEpisode]) -> np.ndarray:
        """One predicted outcome per episode, from one backend call."""
        return np.array([j.outcome for j in self.judge_episodes(episodes)])

    def outcome_predictor(self, action_names: Sequence[str]) -> Callable[[Sequence[Any]], float]:
        """``predict_outcome`` for :class:`rla_gym.wrappers.AdaptiveDifficultyWrapper` on a text env
        (``obs_mode="text"``): its (observation, action, next observation) steps are judged with
        the command's name as the reply."""

        def predict(trajectory: Sequence[Any]) -> float:
            return self.predict_outcome([(obs, action_names[int(a)], nxt) for obs, a, nxt in trajectory])

        return predict

    def statistics(
        self, episodes: Sequence[Sequence[JudgedStep] | TextEpisode], outcomes: Sequence[int]
    ) -> dict[str, float]:
        """Judge ``episodes`` (outcomes +1 / -1) and report p+, p-, mu and Theorem 1's precision
        bound (over the votes that are +1 or -1), the outcome accuracy, the error statistics of the
        predicted outcomes (``p_over``, ``p_under``, ``balance``, ...) and the unparsable share."""
        judgements = self.judge_episodes(episodes)
        return judgement_statistics(judgements, outcomes, self.m)


def judgement_statistics(
    judgements: Sequence[Judgement], outcomes: Sequence[int], m: int
) -> dict[str, float]:
    """The statistics of :meth:`LLMJudge.statistics` from judgements already made."""
    if len(judgements) != len(outcomes):
        raise ValueError(f"{len(judgements)} episodes but {len(outcomes)} outcomes")
    if not judgements:
        raise ValueError("statistics need at least one episode, got none")
    actual = np.asarray(outcomes, dtype=np.float64)
    per_vote = np.concatenate([np.full(j.votes.shape, o) for j, o in zip(judgements, actual, strict=True)])
    votes = np.concatenate([j.votes.reshape(-1, m) for j in judgements])
    cast = votes != 0  # abstentions (unparsable votes counted as 0) carry no sign
    stats = vote_statistics(votes[cast], per_vote[cast])
    predicted = np.array([j.outcome for j in judgements])
    parsed = np.concatenate([j.parsed.reshape(-1, m) for j in judgements])
    mu = stats["mu"]
    return {
        **stats,
        "precision_bound": precision_bound(mu, m) if math.isfinite(mu) else math.nan,
        "outcome_accuracy": float(((predicted > 0) == (actual > 0)).mean()),
        **error_statistics(predicted, actual),
        "unparsable_share": float(1.0 - parsed.mean()) if parsed.size else math.nan,
        "steps": float(len(votes)),
    }
