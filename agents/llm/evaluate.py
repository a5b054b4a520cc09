"""Held-out success of an LLM policy, on the tasks ``rla eval`` gives the RL policies.

A text policy answers a batch of live :class:`~rla_gym.llm.TextEpisode` s with one reply each;
the episode parses the reply (:func:`rla_gym.llm.parse_reply`), and a reply that names no
admissible command runs the no-op and is counted as invalid. Two kinds:

- :class:`LLMPolicy`: a language model behind a :class:`~agents.llm.backends.Backend`, prompted
  with the authors' instruction (think, then put the chosen command's number in ``\\boxed{}``),
  the commands run so far and the episode's prompt;
- :class:`ScriptedPolicy`: the exact oracle or random admissible commands written as boxed
  replies, a stand-in that needs no model.

:func:`evaluate_text_policy` runs one policy on (env, difficulty, held-out task seeds), the
episodes in lockstep so each turn is one batched call; :func:`evaluate_llm` gives the rows of
``rla eval`` (``success`` sampled at the policy's temperature, ``success_greedy`` at 0), so an
LLM and an SB3 policy share one table (``rla eval --run RUN --llm SPEC``).

Examples:
    >>> rows = evaluate_llm(ScriptedPolicy("oracle"), "RLA-TextNav-v0", levels=(0.0,), episodes=3)
    >>> rows[0]["success"], rows[0]["success_greedy"], rows[0]["invalid_replies"]
    (1.0, 1.0, 0.0)
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from agents.llm.backends import Backend, Message, OpenAIBackend, TransformersBackend
from rla_gym.evaluation import heldout_seeds
from rla_gym.llm import TextEpisode

POLICY_INSTRUCTION = (
    "You are playing a text game. Complete the task in as few commands as possible. You see the "
    "goal, the current observation and the numbered commands you can choose. Think step by step, "
    "then put the number of your chosen command in \\boxed{}."
)


class TextPolicy(Protocol):
    """Answers each live episode's prompt with one reply."""

    name: str

    def __call__(self, episodes: Sequence[TextEpisode], prompts: Sequence[str], greedy: bool) -> list[str]:
        """One reply per episode; ``greedy`` asks for the policy's most likely reply."""
        ...


def policy_messages(episode: TextEpisode, prompt: str) -> list[Message]:
    """The chat messages an :class:`LLMPolicy` sends: the instruction, the commands run so far, the prompt."""
    ran = [episode.commands[t.action] if t.valid else "(no admissible command)" for t in episode.steps]
    history = f"Commands so far: {', '.join(ran)}\n\n" if ran else ""
    return [{"role": "system", "content": POLICY_INSTRUCTION}, {"role": "user", "content": history + prompt}]


class LLMPolicy:
    """A language model as a text policy: sampled at ``temperature``, greedy at 0."""

    def __init__(
        self, backend: Backend, name: str = "llm", *, temperature: float = 1.0, max_new_tokens: int = 256
    ) -> None:
        self.backend, self.name = backend, name
        self.temperature, self.max_new_tokens = temperature, max_new_tokens

    def __call__(self, episodes: Sequence[TextEpisode], prompts: Sequence[str], greedy: bool) -> list[str]:
        """One reply per episode, from one backend call."""
        messages = [policy_messages(e, p) for e, p in zip(episodes, prompts, strict=True)]
        temperature = 0.0 if greedy else self.temperature
        replies = self.backend.generate(
            messages, n=1, temperature=temperature, max_new_tokens=self.max_new_tokens
        )
        return [r[0] for r in replies]


class ScriptedPolicy:
    """The exact oracle (``"oracle"``) or a random admissible command (``"random"``) as boxed replies.

    Greedy, the oracle takes the first optimal command; sampled, a random one. No model runs:
    it checks the plumbing and bounds the table from above (oracle) and below (random).
    """

    KINDS = ("oracle", "random")

    def __init__(self, kind: str, seed: int = 0) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"a scripted policy is one of {self.KINDS}, got {kind!r}")
        self.kind, self.name = kind, f"scripted:{kind}"
        self.rng = np.random.default_rng(seed)

    def __call__(self, episodes: Sequence[TextEpisode], prompts: Sequence[str], greedy: bool) -> list[str]:
        """A boxed command number per episode, read from its info."""
        replies = []
        for episode in episodes:
            mask = episode.info["oracle_mask" if self.kind == "oracle" else "action_mask"]
            choices = np.flatnonzero(mask)
            action = int(choices[0] if greedy and self.kind == "oracle" else self.rng.choice(choices))
            replies.append(
                f"I choose {episode.commands[action]}. \\boxed{{{episode.admissible.index(action) + 1}}}"
            )
        return replies


@dataclass(frozen=True)
class TextEvaluation:
    """Aggregate of a text policy over held-out tasks."""

    episodes: int
    success_rate: float
    mean_length: float
    invalid_share: float
    seconds: float


def evaluate_text_policy(
    policy: TextPolicy,
    env_id: str,
    difficulty: float,
    task_seeds: Sequence[int],
    *,
    greedy: bool = False,
    batch: int = 32,
) -> TextEvaluation:
    """Run ``policy`` once on each task (difficulty, task seed) of ``env_id``, ``batch`` episodes at a
    time in lockstep; the tasks are those :func:`rla_gym.evaluation.evaluate` runs."""
    start = time.perf_counter()
    successes, steps, invalid = 0, 0, 0
    pool = [TextEpisode(env_id, difficulty=difficulty) for _ in range(min(batch, len(task_seeds)))]
    for offset in range(0, len(task_seeds), batch):
        seeds = task_seeds[offset : offset + batch]
        live = pool[: len(seeds)]
        prompts = []
        for episode, seed in zip(live, seeds, strict=True):
            episode.task = episode.base.make_task(difficulty, seed)
            prompts.append(episode.reset())
        while live:
            replies = policy(live, prompts, greedy)
            if len(replies) != len(live):
                raise RuntimeError(f"{policy.name} gave {len(replies)} replies for {len(live)} episodes")
            still, prompts = [], []
            for episode, reply in zip(live, replies, strict=True):
                prompt, _, terminated, truncated, info = episode.step(reply)
                steps += 1
                invalid += not info["reply_valid"]
                if terminated or truncated:
                    successes += bool(info["is_success"])
                else:
                    still.append(episode)
                    prompts.append(prompt)
            live = still
    n = max(len(task_seeds), 1)
    return TextEvaluation(
        len(task_seeds), successes / n, steps / n, invalid / max(steps, 1), time.perf_counter() - start
    )


def evaluate_llm(
    policy: TextPolicy, env_id: str, levels: Sequence[float], episodes: int, *, batch: int = 32
) -> list[dict[str, Any]]:
    """Rows in ``rla eval``'s format at each difficulty: ``success`` and ``mean_length`` of the
    sampled policy, ``success_greedy`` and ``mean_length_greedy`` of the greedy one, on
    ``heldout_seeds(episodes)``, plus the policy's name and its share of invalid replies."""
    seeds = heldout_seeds(episodes)
    rows = []
    for level in levels:
        sampled = evaluate_text_policy(policy, env_id, level, seeds, batch=batch)
        greedy = evaluate_text_policy(policy, env_id, level, seeds, greedy=True, batch=batch)
        rows.append(
            {
                "policy": policy.name, "difficulty": level,
                "success": sampled.success_rate, "mean_length": sampled.mean_length,
                "success_greedy": greedy.success_rate, "mean_length_greedy": greedy.mean_length,
                "invalid_replies": sampled.invalid_share, "invalid_replies_greedy": greedy.invalid_share,
            }
        )  # fmt: skip
    return rows


def policy_from_spec(
    spec: str, *, temperature: float = 1.0, max_new_tokens: int = 256, seed: int = 0
) -> TextPolicy:
    """A text policy from a command-line spec:

    - ``scripted:oracle`` or ``scripted:random`` (:class:`ScriptedPolicy`);
    - ``hf:PATH``, a local ``transformers`` model directory
      (:class:`~agents.llm.backends.TransformersBackend`);
    - ``openai:URL:MODEL``, an OpenAI-compatible server such as ``vllm serve``
      (:class:`~agents.llm.backends.OpenAIBackend`; the key, if any, from ``OPENAI_API_KEY``).
    """
    kind, _, rest = spec.partition(":")
    if kind == "scripted":
        return ScriptedPolicy(rest, seed=seed)
    backend: Backend
    if kind == "hf" and rest:
        backend = TransformersBackend.from_pretrained(rest)
    elif kind == "openai" and rest:
        backend = OpenAIBackend.from_spec(rest, api_key=os.environ.get("OPENAI_API_KEY"))
    else:
        raise ValueError(
            f"an LLM policy is scripted:oracle, scripted:random, hf:PATH or openai:URL:MODEL, got {spec!r}"
        )
    return LLMPolicy(backend, spec, temperature=temperature, max_new_tokens=max_new_tokens)
