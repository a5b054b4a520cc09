"""Any rla-gym env as a multi-turn text episode for a language-model agent (numpy and gymnasium only).

``TextEpisode`` wraps one task: :meth:`TextEpisode.reset` returns the prompt (the env's text
observation, which starts with the goal, and the numbered admissible commands) and
:meth:`TextEpisode.step` takes the model's reply as a string and returns Gymnasium's
5-tuple with a text observation. A reply may name its command in three ways (see
:func:`parse_reply`). A reply that names no admissible command runs the env's no-op
command, which is always admissible and changes nothing, and the next observation says so;
it never raises. Every step is kept in :attr:`TextEpisode.steps` as (prompt, reply, next
observation), for a judge model.

Examples:
    >>> episode = TextEpisode("RLA-TextNav-v0", difficulty=0.0, seed=3)
    >>> prompt = episode.reset()
    >>> prompt.splitlines()[0]
    'Goal: go to the purple office.'
    >>> _, reward, terminated, _, info = episode.step("\\\\boxed{2}")  # the second listed command
    >>> info["reply_valid"], len(episode.steps)
    (True, 1)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from rla_gym.core import RLAEnv, Task

_BOXED = re.compile(r"\\boxed\{\s*([^{}]*?)\s*\}")
_CALL = re.compile(r"""act\(\s*(?:command\s*=\s*)?["']([^"']+)["']\s*\)""")


def parse_reply(reply: str, commands: list[str], admissible: list[int]) -> int | None:
    """The command a reply names, or None. Three forms, tried in this order:

    - the authors' numbered choice, ``\\boxed{k}``: the k-th admissible command as listed (from 1),
      or a command name inside the box;
    - a tool call, ``act("go north")`` or JSON ``{"name": "act", "arguments": {"command": ...}}``;
    - a command name anywhere in the reply (the last one named, so reasoning may come first).

    Only admissible commands count.
    """
    if not isinstance(reply, str):
        raise TypeError(f"reply must be a string, got {reply!r}")
    lowered = [name.lower() for name in commands]

    def by_name(text: str) -> int | None:
        text = text.strip().strip("\"'.").lower()
        return lowered.index(text) if text in lowered and lowered.index(text) in admissible else None

    boxes = _BOXED.findall(reply)
    if boxes:
        inside = boxes[-1]
        if inside.isdigit():
            k = int(inside)
            return admissible[k - 1] if 1 <= k <= len(admissible) else None
        return by_name(inside)
    calls = _CALL.findall(reply)
    if calls:
        return by_name(calls[-1])
    try:
        call = json.loads(reply)
    except (json.JSONDecodeError, ValueError):
        call = None
    if isinstance(call, dict) and call.get("name") == "act" and isinstance(call.get("arguments"), dict):
        return by_name(str(call["arguments"].get("command", "")))
    text = reply.lower()
    named = [(text.rfind(lowered[a]), a) for a in admissible if lowered[a] in text]
    return max(named)[1] if named else None


@dataclass
class Turn:
    """One step of a text episode: what the model saw, what it said, and what happened."""

    prompt: str
    reply: str
    observation: str
    action: int
    valid: bool


@dataclass
class TextEpisode:
    """One task of an rla-gym env as a multi-turn text episode (see the module doc).

    Give the task as ``task`` (an :class:`rla_gym.Task`) or as ``env_id``, ``difficulty`` and
    ``seed``; ``seed=None`` draws a fresh task at each reset.
    """

    env_id: str = ""
    difficulty: float = 0.5
    seed: int | None = None
    task: Task | None = None
    steps: list[Turn] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.task is not None:
            self.env_id = self.task.env_id
        self.env = gym.make(self.env_id, difficulty=self.difficulty, obs_mode="text")
        base = self.env.unwrapped
        if not isinstance(base, RLAEnv):
            raise ValueError(f"{self.env_id!r} is not an rla-gym environment")
        self.base: RLAEnv = base
        self.commands = list(base.action_names)
        self._prompt = ""
        self._info: dict[str, Any] = {}
        self.done = True

    @property
    def info(self) -> dict[str, Any]:
        """The env's info after the last reset or step (the regular info of the contract)."""
        return self._info

    @property
    def admissible(self) -> list[int]:
        """The admissible commands, in the order the prompt lists them (numbered from 1)."""
        return np.flatnonzero(self._info["action_mask"]).tolist()

    def _render(self, observation: str, note: str = "") -> str:
        listed = "\n".join(f"{k}. {self.commands[a]}" for k, a in enumerate(self.admissible, start=1))
        return (note + "\n" if note else "") + f"{observation}\nCommands:\n{listed}"

    def reset(self) -> str:
        """Start the episode; returns the first prompt."""
        if self.task is not None:
            task = self.task
        elif self.seed is not None:
            task = self.base.make_task(self.difficulty, self.seed)
        else:
            task = None
        observation, self._info = self.env.reset(options={"task": task} if task is not None else None)
        self.steps, self.done = [], False
        self._prompt = self._render(observation)
        return self._prompt

    def step(self, reply: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Act on the model's reply; an unusable reply runs the no-op and is flagged, never raised."""
        if self.done:
            raise RuntimeError("step() on a finished or unstarted episode; call reset() first")
        action = parse_reply(reply, self.commands, self.admissible)
        valid = action is not None
        ran = self.base.noop_action if action is None else action
        observation, reward, terminated, truncated, info = self.env.step(ran)
        note = "" if valid else "Your reply named no admissible command, so nothing happened."
        self._info = info
        prompt = self._render(observation, note)
        info = {**info, "reply_valid": valid, "command": self.commands[ran] if valid else None}
        self.steps.append(Turn(self._prompt, reply, prompt, ran, valid))
        self._prompt = prompt
        self.done = bool(terminated or truncated)
        return prompt, float(reward), bool(terminated), bool(truncated), info
