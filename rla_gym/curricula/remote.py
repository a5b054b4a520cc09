"""One curriculum for a whole Ray cluster: a Ray actor serves it, every env holds a proxy.

Every env runner, on every node, draws its tasks from the same curriculum and reports its
episodes to it, so the curriculum sees all the experience (RLlib's env runners, or any set of
Ray workers). Ray is imported when used (``pip install 'rla-gym[ray]'``).

Usage (``docs/integrations.md`` has a tested example)::

    server = serve_curriculum(SuccessBandCurriculum("RLA-TextNav-v0"))  # once, after ray.init()
    env = CurriculumWrapper(gym.make("RLA-TextNav-v0"), RemoteCurriculum(server), slot=k)  # per env
"""

from __future__ import annotations

from typing import Any

from rla_gym.core import Task
from rla_gym.curricula.base import Curriculum, EpisodeResult


def _ray() -> Any:
    try:
        import ray
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "a curriculum served by a Ray actor needs Ray: pip install 'rla-gym[ray]'"
        ) from error
    return ray


class CurriculumServer:
    """The actor's body: holds the curriculum and a log of what it handed out and was told.

    ``log()`` returns (issued, reported): the task keys handed out per slot, in order, and the
    task keys of the reported episodes, in the order they arrived (for exactness checks).
    """

    def __init__(self, curriculum: Curriculum) -> None:
        if not isinstance(curriculum, Curriculum):
            raise TypeError(f"curriculum must be an rla_gym Curriculum, got {curriculum!r}")
        self.curriculum = curriculum
        self.issued: dict[int, list[int]] = {}
        self.reported: list[int] = []

    def env_id(self) -> str:
        return self.curriculum.env_id

    def next_task(self, slot: int) -> tuple[Task, bool]:
        task = self.curriculum.next_task(slot)
        self.issued.setdefault(slot, []).append(task.key)
        return task, self.curriculum.trains_on(task)

    def next_group(self, slot: int, size: int) -> tuple[list[Task], bool]:
        tasks = self.curriculum.next_group(slot, size)
        self.issued.setdefault(slot, []).extend(task.key for task in tasks)
        return tasks, self.curriculum.trains_on(tasks[0])

    def update(self, result: EpisodeResult) -> None:
        self.curriculum.update(result)
        self.reported.append(result.task.key)

    def verdict(self, task: Task) -> bool | None:
        return self.curriculum.verdict(task)

    def abandon(self, task: Task) -> None:
        self.curriculum.abandon(task)

    def needs_values(self) -> bool:
        return self.curriculum.needs_values

    def metrics(self) -> dict[str, float]:
        return self.curriculum.metrics()

    def state_dict(self) -> dict[str, Any]:
        return self.curriculum.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.curriculum.load_state_dict(state)

    def log(self) -> tuple[dict[int, list[int]], list[int]]:
        return self.issued, self.reported


def serve_curriculum(curriculum: Curriculum, *, name: str | None = None) -> Any:
    """Start a Ray actor that serves ``curriculum`` (named ``name`` if given, so that runners
    can look it up with ``ray.get_actor(name)``); returns its handle."""
    ray = _ray()
    actor = ray.remote(num_cpus=0)(CurriculumServer)
    options = {"name": name, "get_if_exists": True} if name else {}
    return actor.options(**options).remote(curriculum)


class RemoteCurriculum(Curriculum):
    """A proxy for the curriculum a Ray actor serves (:func:`serve_curriculum`).

    ``next_task`` and ``update`` are calls to the actor that wait for its answer, so each
    env's reports arrive in order, and the one curriculum sees every env's episodes. Give each
    env its own ``slot`` (``CurriculumWrapper(env, proxy, slot=k)``) when the strategy keeps
    per-slot state. The proxy itself holds no state: ``state_dict`` is the served curriculum's.
    """

    def __init__(self, server: Any) -> None:
        self.ray = _ray()
        self.server = server
        super().__init__(self.ray.get(server.env_id.remote()))
        self._trains: dict[Task, bool] = {}

    def next_task(self, slot: int = 0) -> Task:
        task, trains = self.ray.get(self.server.next_task.remote(slot))
        self._trains[task] = trains
        return task

    def next_group(self, slot: int, size: int) -> list[Task]:
        tasks, trains = self.ray.get(self.server.next_group.remote(slot, size))
        self._trains[tasks[0]] = trains
        return list(tasks)

    def trains_on(self, task: Task) -> bool:
        return self._trains.get(task, True)

    def verdict(self, task: Task) -> bool | None:
        return self.ray.get(self.server.verdict.remote(task))

    def abandon(self, task: Task) -> None:
        self._trains.pop(task, None)
        self.ray.get(self.server.abandon.remote(task))

    def reseed(self, seed: int) -> None:
        """Nothing: the served curriculum draws for every env, from its own seed."""

    @property
    def needs_values(self) -> bool:
        return bool(self.ray.get(self.server.needs_values.remote()))

    def update(self, result: EpisodeResult) -> None:
        if result.task.env_id != self.env_id:
            raise ValueError(f"result is for {result.task.env_id!r}, this curriculum serves {self.env_id!r}")
        self._trains.pop(result.task, None)
        self.ray.get(self.server.update.remote(result))
        self.episodes += 1

    def metrics(self) -> dict[str, float]:
        return dict(self.ray.get(self.server.metrics.remote()))

    def state_dict(self) -> dict[str, Any]:
        return dict(self.ray.get(self.server.state_dict.remote()))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ray.get(self.server.load_state_dict.remote(state))
