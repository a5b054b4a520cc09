"""An rla-gym task as a TRL environment, and task rows drawn from any curriculum.

- :class:`TaskEnvironment` is an ``environment_factory`` for TRL's ``GRPOTrainer``: ``reset``
  takes a dataset row's task columns (``env_id``, ``difficulty``, ``seed``), so every rollout
  of a GRPO group runs the same task; ``act(command)`` is its one tool; ``get_reward`` is the
  outcome, +1 or -1. It runs the task as a :class:`rla_gym.llm.TextEpisode` and keeps the turns
  for a judge.
- :class:`CurriculumTasks` draws those rows from a curriculum (any of :mod:`rla_gym.curricula`,
  including the rm-balance rule of ``AdaptiveDifficultyWrapper``), one row per group, lazily,
  as a ``datasets.IterableDataset``, and hands the curriculum each finished episode's result
  (``agents.llm.grpo_trainer.RLAnythingGRPOTrainer`` reports them).

Examples:
    >>> environment = TaskEnvironment()
    >>> prompt = environment.reset(env_id="RLA-TextNav-v0", difficulty=0.0, seed=3)
    >>> print(environment.act("go south"))
    Goal: go to the purple office.
    You are in the purple office. Exits: north (the brown porch).
    You see: nothing. You carry: nothing.
    The episode is over: you reached the goal.
    >>> environment.get_reward(), len(environment.turns)
    (1.0, 1)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from agents.llm.advantages import Call
from rla_gym.core import Task
from rla_gym.curricula.base import Curriculum, EpisodeResult, check_positive
from rla_gym.llm import TextEpisode, Turn

try:
    import datasets
except ImportError as error:  # pragma: no cover - the llm extra brings it
    raise ImportError("agents.llm needs the llm extra: pip install 'rla-gym[llm]'") from error

#: What the model reads before the task's first observation.
INSTRUCTIONS = (
    "Reach the goal. Each turn, call the act tool once with one of the listed commands, "
    "by name or by its number."
)
OVER = "The episode is over: {}."


class TaskEnvironment:
    """One rla-gym task per ``reset`` for TRL's ``environment_factory`` (see the module doc).

    TRL turns every public method other than ``reset`` and ``get_reward`` into a tool, so this
    class has one: :meth:`act`. Its state is public for a trainer: :attr:`task`, :attr:`turns`
    (for a judge), :attr:`calls` (each act call's returned text and the env step it ran),
    :attr:`outcome` and :attr:`trains` (whether the row's curriculum trains on this task).
    """

    def __init__(self) -> None:
        self.episode: TextEpisode | None = None
        self.task: Task | None = None
        self.trains = True
        self.calls: list[Call] = []
        self.episode_return = 0.0
        self._first = ""

    def reset(self, env_id: str, difficulty: float, seed: int, trains: bool = True, **columns: Any) -> str:
        """Start the row's task; returns the first prompt. Other columns of the row are ignored."""
        task = Task(env_id, float(difficulty), int(seed))
        if self.episode is None or self.episode.env_id != env_id:
            self.episode = TextEpisode(task=task)
        self.episode.task = task
        self.task, self.trains = task, bool(trains)
        self.calls, self.episode_return = [], 0.0
        self._first = self.episode.reset()
        return f"{INSTRUCTIONS}\n\n{self._first}"

    def act(self, command: str) -> str:
        """Run one command in the environment.

        Args:
            command: One of the listed commands, by name (e.g. "go north") or by its number in the list.

        Returns:
            What happened and the commands available next, or why nothing happened.
        """
        episode = self.episode
        if episode is None or episode.done:
            text = OVER.format("no command runs")
            self.calls.append((text, None))
            return text
        choice = str(command).strip()
        listed = episode.admissible
        if choice.isdigit() and 1 <= int(choice) <= len(listed):
            choice = episode.commands[listed[int(choice) - 1]]
        text, reward, _, _, _ = episode.step(choice)
        self.episode_return += reward
        if episode.done:  # no commands to list any more
            ending = "you reached the goal" if self.outcome == 1 else "the task failed"
            text = text.split("\nCommands:\n")[0] + "\n" + OVER.format(ending)
        self.calls.append((text, len(episode.steps) - 1))
        return text

    def get_reward(self) -> float:
        """The outcome as TRL's rollout reward: +1.0 success, -1.0 otherwise."""
        return float(self.outcome)

    @property
    def outcome(self) -> int:
        """+1 if the episode ended in success, else -1 (also when the model stopped before the end)."""
        episode = self.episode
        return 1 if episode is not None and episode.done and episode.info.get("is_success") else -1

    @property
    def turns(self) -> list[Turn]:
        """The episode's steps so far (prompt, command, next observation), for a judge."""
        return [] if self.episode is None else self.episode.steps

    @property
    def observation(self) -> str:
        """The text the next step starts from (what a :class:`rla_gym.llm.Turn` records as its prompt)."""
        steps = self.turns
        return steps[-1].observation if steps else self._first


def episode_result(environment: TaskEnvironment, votes: np.ndarray | None) -> EpisodeResult:
    """The curriculum's view of a finished rollout; with a judge's ``votes`` (steps, m), the
    predicted outcome is their mean (-1.0 for an episode without a step, which cannot succeed)."""
    if environment.task is None:
        raise RuntimeError("the environment was never reset")
    prediction = None
    if votes is not None:
        prediction = float(np.mean(votes)) if np.size(votes) else -1.0
    return EpisodeResult(
        environment.task, environment.outcome, environment.episode_return, len(environment.turns),
        rm_outcome_prediction=prediction, rm_votes=votes,
    )  # fmt: skip


class CurriculumTasks:
    """Task rows for ``GRPOTrainer(train_dataset=...)`` drawn from ``curriculum``, and the way back.

    Each row is one group: ``curriculum.next_group(0, group_size)`` gives the task that all
    ``group_size`` rollouts run (TRL repeats the row ``num_generations`` times, so the two must
    match), drawn when the trainer reads the row, not before. :meth:`report` hands the curriculum
    the results of finished episodes. Rows carry ``env_id``, ``difficulty``, ``seed`` and
    ``trains`` (the curriculum's :meth:`~rla_gym.curricula.Curriculum.trains_on`).

    Examples:
        >>> from rla_gym.curricula import FixedCurriculum
        >>> tasks = CurriculumTasks(FixedCurriculum("RLA-TextNav-v0", difficulty=0.5), group_size=4)
        >>> row = next(tasks.rows())
        >>> row["env_id"], row["difficulty"], row["trains"]
        ('RLA-TextNav-v0', 0.5, True)
    """

    def __init__(self, curriculum: Curriculum, group_size: int) -> None:
        if not isinstance(curriculum, Curriculum):
            raise TypeError(f"curriculum must be an rla_gym Curriculum, got {curriculum!r}")
        self.curriculum = curriculum
        self.group_size = check_positive(group_size, "group_size", integer=True)
        self.drawn = 0
        self.reported = 0

    def rows(self) -> Iterator[dict[str, Any]]:
        """Rows without end, one group's task each."""
        while True:
            group = self.curriculum.next_group(0, self.group_size)
            task = group[0]
            if any(other != task for other in group):
                raise ValueError(f"{type(self.curriculum).__name__}.next_group gave different tasks: {group}")
            self.drawn += 1
            yield {
                "env_id": task.env_id,
                "difficulty": task.difficulty,
                "seed": task.seed,
                "trains": self.curriculum.trains_on(task),
            }

    def dataset(self) -> datasets.IterableDataset:
        """:meth:`rows` as a ``datasets.IterableDataset`` (give the trainer ``max_steps``)."""
        return datasets.IterableDataset.from_generator(self.rows)

    def report(self, results: Sequence[EpisodeResult]) -> None:
        """Hand the curriculum each result, in order."""
        for result in results:
            self.curriculum.update(result)
            self.reported += 1
