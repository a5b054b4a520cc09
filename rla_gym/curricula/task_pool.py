"""The paper's per-task environment adaptation over a pool of task slots."""

from __future__ import annotations

from typing import Any

import numpy as np

from rla_gym.core import Task, check_difficulty
from rla_gym.curricula.base import Curriculum, EpisodeResult, check_band, check_bounds, check_positive
from rla_gym.stats import error_statistics


class TaskPoolCurriculum(Curriculum):
    """RLAnything's environment adaptation: per-task accuracy drives harder / easier variants.

    Each of ``pool_size`` slots holds an active task. Its accuracy ``acc`` is measured over
    ``rollouts_per_task`` rollouts; acc >= alpha_high proposes a harder variant (same seed,
    difficulty + step), acc <= alpha_low an easier one. The proposal is *pending*: the
    slot's next ``rollouts_per_task`` rollouts run it, and it is accepted iff
    harder: alpha_low <= acc' < acc, easier: acc < acc' <= alpha_high, and always acc' > 0
    (solvable). An accepted variant replaces the slot's task; ``history`` keeps every
    judgement. While a proposal is pending the slot's rollouts go to it, not to the active
    task. ``next_task`` serves a slot whose round still needs rollouts, the one served least
    so far first, so every slot gets an even share of the rollouts.

    With ``fresh_seeds=True`` a slot adapts a difficulty level rather than one task: every
    rollout it serves is a new task (a fresh seed) at the slot's difficulty, and ``acc`` is
    measured over those tasks. The paper adapts single tasks drawn from a large data set; with
    a pool of a few slots and fixed seeds the policy trains on ``pool_size`` tasks and can
    memorise them (measured in ``docs/results.md``).

    **The data set** (``dataset_size``, default 1000; ``None`` for a fixed pool). As in the
    paper, the pool's slots are the tasks of the current round, drawn from a large data set
    of ``dataset_size`` training tasks (seeds; at ``start`` when given, else at difficulties
    spread evenly over ``bounds``, as a benchmark's tasks differ). A slot keeps its task while
    the task is being adapted; once its accuracy lies inside the band (or it cannot move
    further, or ``max_tries`` proposals in a row were rejected) the slot draws another task
    from the data set. An accepted variant replaces its original in the data set. With
    ``dataset_size=None`` the ``pool_size`` tasks drawn at start stay for the whole run, and
    the policy can memorise them (measured in ``docs/results.md``).

    **Step search** (``escalate=True``, default): a rejected proposal that did not go far
    enough (a harder one still solved as often, an easier one still unsolved or no more
    solved) doubles the slot's next step; one that overshot the band (harder: acc' below
    alpha_low; easier: acc' above alpha_high) halves it; an acceptance resets it. So a slot
    whose first variant is still unsolvable (acc' = 0) keeps moving instead of proposing the
    same variant forever; the paper's environment model has several tries and free-form
    edits for the same purpose. ``escalate=False`` keeps one step size.

    Variants stay within ``bounds``. Step size: ``step`` by default. With
    ``rm_scaled_step=True`` and RM predictions on the judged rollouts, the step becomes
    step * (2 - balance) of the RM's outcome errors on that task (at most 2 * step):
    lopsided errors mean the RM is only learning one of p+ / p- there, so the task is far
    from the informative band and a bigger move pays.

    Examples:
        >>> from rla_gym.curricula import EpisodeResult
        >>> c = TaskPoolCurriculum("RLA-TextNav-v0", pool_size=1, rollouts_per_task=2, step=0.25,
        ...                        dataset_size=None)  # one fixed task
        >>> for _ in range(2):  # acc = 1.0 >= 0.8: a harder variant is proposed
        ...     c.update(EpisodeResult(c.next_task(), 1, 1.0, 3))
        >>> for outcome in (1, -1):  # acc' = 0.5: in [0.2, 1.0) and > 0, accepted
        ...     c.update(EpisodeResult(c.next_task(), outcome, 0.0, 3))
        >>> c.slots[0]["active"].difficulty, c.accepted
        (0.25, 1)
    """

    state_fields = ("slots", "history", "accepted", "rejected", "stale", "dataset", "draws", "_verdicts")
    optional_state_fields = ("_verdicts",)

    def __init__(
        self,
        env_id: str,
        *,
        pool_size: int = 16,
        rollouts_per_task: int = 8,
        start: float | None = None,
        step: float = 0.1,
        alpha_low: float = 0.2,
        alpha_high: float = 0.8,
        rm_scaled_step: bool = False,
        fresh_seeds: bool = False,
        dataset_size: int | None = 1000,
        escalate: bool = True,
        max_tries: int = 8,
        bounds: tuple[float, float] = (0.0, 1.0),
        seed: int = 0,
    ) -> None:
        super().__init__(env_id, seed=seed)
        self.low, self.high = check_bounds(bounds)
        self.pool_size = check_positive(pool_size, "pool_size", integer=True)
        self.rollouts = check_positive(rollouts_per_task, "rollouts_per_task", integer=True)
        self.step = check_positive(step, "step")
        self.alpha_low, self.alpha_high = check_band(alpha_low, alpha_high, ("alpha_low", "alpha_high"))
        if not isinstance(rm_scaled_step, bool):
            raise TypeError(f"rm_scaled_step must be a bool, got {rm_scaled_step!r}")
        self.rm_scaled_step = rm_scaled_step
        if not isinstance(fresh_seeds, bool):
            raise TypeError(f"fresh_seeds must be a bool, got {fresh_seeds!r}")
        self.fresh_seeds = fresh_seeds
        if not isinstance(escalate, bool):
            raise TypeError(f"escalate must be a bool, got {escalate!r}")
        self.escalate = escalate
        self.max_tries = check_positive(max_tries, "max_tries", integer=True)
        if start is not None:
            start = check_difficulty(start, "start")
            if not self.low <= start <= self.high:
                raise ValueError(f"start must lie within bounds {bounds!r}, got {start!r}")
        #: The data set's tasks (an accepted variant replaces its original); empty for a fixed pool.
        self.dataset: list[Task] = []
        if dataset_size is not None:  # checked with fresh_seeds too, where it does not apply
            size = check_positive(dataset_size, "dataset_size", integer=True)
        if dataset_size is not None and not fresh_seeds:
            if size < self.pool_size:
                raise ValueError(f"dataset_size must be >= pool_size {self.pool_size}, got {size}")
            levels = [start] * size if start is not None else np.linspace(self.low, self.high, size).tolist()
            self.dataset = [self.new_task(level) for level in self.rng.permutation(levels)]
        self.draws = 0
        self.slots: list[dict[str, Any]] = []
        for _ in range(self.pool_size):
            slot: dict[str, Any] = {"served": 0}
            self._fill(slot, self.new_task(self.low if start is None else start))
            self.slots.append(slot)
        self.history: list[dict[str, Any]] = []
        # task id -> [was its proposal accepted, groups of it still to read the verdict]
        self._verdicts: dict[str, list[Any]] = {}
        self.accepted = self.rejected = self.stale = 0

    def _check_state(self, state: dict[str, Any]) -> None:
        if len(state["slots"]) != self.pool_size:
            raise ValueError(f"state holds {len(state['slots'])} slots, this pool_size is {self.pool_size}")

    def _fill(self, slot: dict[str, Any], task: Task) -> None:
        """Give ``slot`` a new active task: the next data set draw, or ``task`` for a fixed pool."""
        index = None
        if self.dataset:
            held = {other["index"] for other in self.slots if other is not slot}
            index = int(self.rng.integers(len(self.dataset)))
            while index in held:  # two slots on one task could not tell their rollouts apart
                index = int(self.rng.integers(len(self.dataset)))
            task, self.draws = self.dataset[index], self.draws + 1
        slot.update(active=task, index=index, acc=None, rejections=0, scale=1.0)
        self._start_round(slot, task, 0, None)

    def next_task(self, slot: int = 0) -> Task:
        return self._group(1)[0]

    def next_group(self, slot: int, size: int) -> list[Task]:
        """One slot's rollouts as a group of ``size`` rollouts of one task (with ``fresh_seeds``,
        one fresh task at the slot's difficulty): a round of the paper's k rollouts per task
        when ``size == rollouts_per_task``."""
        return self._group(check_positive(size, "size", integer=True))

    def _group(self, size: int) -> list[Task]:
        # a slot whose round still needs rollouts first, then the one served least overall; the
        # round count alone (reset by every judgement) starved slots stuck one short of a round
        chosen = min(self.slots, key=lambda s: (s["assigned"] >= self.rollouts, s.get("served", 0)))
        chosen["assigned"] += size
        chosen["served"] = chosen.get("served", 0) + size
        task = chosen["phase"] if not self.fresh_seeds else self.new_task(chosen["phase"].difficulty)
        if self.fresh_seeds:
            issued = chosen["issued"]  # task -> rollouts issued and not yet back
            issued[task] = issued.get(task, 0) + size
        groups = chosen.setdefault("groups", {})  # task id -> groups of this round handed out
        groups[task.task_id] = groups.get(task.task_id, 0) + 1
        return [task] * size

    def abandon(self, task: Task) -> None:
        """A rollout of ``task`` that will not be reported (a round cut short) no longer counts as
        assigned, so its slot is served again."""
        slot = self._slot_of(task)
        if slot is None:
            return
        slot["assigned"] = max(0, slot["assigned"] - 1)
        slot["served"] = max(0, slot.get("served", 0) - 1)
        if self.fresh_seeds:
            slot["issued"][task] -= 1
            if not slot["issued"][task]:
                del slot["issued"][task]

    def verdict(self, task: Task) -> bool | None:
        """Whether the proposal ``task``'s round judged was accepted; None if it judged no
        proposal (or every group of the round has read it). The paper trains on a proposal's
        rollouts only if it is accepted: a trainer that holds a round back until its judgement
        (``agents.grpo``) asks here, once per group; a slot served more groups than its round
        needs gives each the verdict the first ones earned."""
        entry = self._verdicts.get(task.task_id)
        if entry is None:
            return None
        entry[1] -= 1  # each group of the judged round reads it once
        if entry[1] <= 0:
            del self._verdicts[task.task_id]
        return bool(entry[0])

    def is_pending(self, task: Task) -> bool:
        """Whether ``task`` is a proposal awaiting judgement (the paper trains on it only if accepted)."""
        slot = self._slot_of(task)
        return slot is not None and bool(slot["direction"])

    def _slot_of(self, task: Task) -> dict[str, Any] | None:
        """The slot whose current round ``task`` belongs to, or None (an earlier round's task)."""
        if self.fresh_seeds:
            return next((s for s in self.slots if task in s["issued"]), None)  # dict lookups
        return next((s for s in self.slots if s["phase"] == task), None)

    def _learn(self, result: EpisodeResult) -> None:
        slot = self._slot_of(result.task)
        if slot is None:  # assigned before its slot's round ended: a rollout, but not evidence
            self.stale += 1
            return
        if self.fresh_seeds:
            issued = slot["issued"]  # each fresh task counts once
            issued[result.task] -= 1
            if not issued[result.task]:
                del issued[result.task]
        slot.setdefault("judged", []).append(result.task.task_id)
        slot["outcomes"].append(result.outcome)
        if result.rm_outcome_prediction is not None:
            slot["predictions"].append(result.rm_outcome_prediction)
        if len(slot["outcomes"]) == self.rollouts:
            self._judge(slot)

    def _judge(self, slot: dict[str, Any]) -> None:
        acc = sum(o == 1 for o in slot["outcomes"]) / self.rollouts
        step = self._step_size(slot) * slot["scale"]
        active = slot["active"]
        if slot["direction"] == 0:
            slot["acc"] = acc
            if slot["rejections"] < self.max_tries or not self.dataset:
                if acc >= self.alpha_high and active.difficulty < self.high:
                    self._propose(slot, min(active.difficulty + step, self.high), +1, acc)
                    return
                if acc <= self.alpha_low and active.difficulty > self.low:
                    self._propose(slot, max(active.difficulty - step, self.low), -1, acc)
                    return
            if self.dataset:  # in the band, or as far as it can go: the slot moves on
                self._fill(slot, active)
                return
            slot.update(rejections=0, scale=1.0)
        else:
            base = slot["base_acc"]
            if slot["direction"] > 0:
                accept = self.alpha_low <= acc < base and acc > 0
            else:
                accept = base < acc <= self.alpha_high and acc > 0
            self.history.append(
                {"from": active, "to": slot["phase"], "direction": slot["direction"],
                 "acc": base, "new_acc": acc, "accepted": accept, "episode": self.episodes}
            )  # fmt: skip
            # every task of the round, its groups counted: a slot served more groups than a round
            # needs (more groups than slots) is judged on the first ones, the rest share the verdict
            groups = dict.fromkeys(slot.get("judged", []), 1) | slot.get("groups", {})
            self._verdicts.update({task_id: [accept, n] for task_id, n in groups.items()})
            for task_id in list(self._verdicts)[: max(0, len(self._verdicts) - 64 * self.pool_size)]:
                del self._verdicts[task_id]  # verdicts no trainer reads: keep the latest only
            if accept:
                slot.update(active=slot["phase"], acc=acc, rejections=0, scale=1.0)
                if slot["index"] is not None:
                    self.dataset[slot["index"]] = slot["phase"]
                self.accepted += 1
            else:
                overshot = acc < self.alpha_low if slot["direction"] > 0 else acc > self.alpha_high
                if self.escalate:
                    slot["scale"] = min(max(slot["scale"] * (0.5 if overshot else 2.0), 0.125), 1024.0)
                slot["rejections"] += 1
                self.rejected += 1
        self._start_round(slot, slot["active"], 0, None)

    def _step_size(self, slot: dict[str, Any]) -> float:
        if not self.rm_scaled_step or len(slot["predictions"]) != self.rollouts:
            return self.step
        balance = error_statistics(slot["predictions"], slot["outcomes"])["balance"]
        return self.step * (2.0 - balance)

    def _propose(self, slot: dict[str, Any], difficulty: float, direction: int, acc: float) -> None:
        variant = Task(self.env_id, difficulty, slot["active"].seed)
        self._start_round(slot, variant, direction, acc)

    @staticmethod
    def _start_round(slot: dict[str, Any], task: Task, direction: int, base_acc: float | None) -> None:
        slot.update(
            phase=task, direction=direction, base_acc=base_acc, outcomes=[], predictions=[], assigned=0,
            issued={}, judged=[], groups={},
        )  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._verdicts = {  # states saved before verdicts counted their groups: read once
            task_id: entry if isinstance(entry, list) else [entry, 1]
            for task_id, entry in self._verdicts.items()
        }
        for slot in self.slots:  # states saved before ``issued`` became a dict held a list
            if isinstance(slot.get("issued"), list):
                counts: dict[Task, int] = {}
                for task in slot["issued"]:
                    counts[task] = counts.get(task, 0) + 1
                slot["issued"] = counts

    def metrics(self) -> dict[str, float]:
        difficulties = [s["active"].difficulty for s in self.slots]
        accs = [s["acc"] for s in self.slots if s["acc"] is not None]
        return {
            **super().metrics(),
            "accepted": self.accepted,
            "rejected": self.rejected,
            "pending": sum(bool(s["direction"]) for s in self.slots),
            "stale": self.stale,
            "pool_difficulty_mean": sum(difficulties) / len(difficulties),
            "pool_difficulty_min": min(difficulties),
            "pool_difficulty_max": max(difficulties),
            "slot_accuracy_mean": sum(accs) / len(accs) if accs else float("nan"),
            **({"dataset_draws": self.draws} if self.dataset else {}),
        }


class FreshTaskPoolCurriculum(TaskPoolCurriculum):
    """The task pool with ``fresh_seeds=True``: slots adapt difficulty levels, every rollout a new task.

    Examples:
        >>> c = FreshTaskPoolCurriculum("RLA-TextNav-v0", pool_size=1)
        >>> len({c.next_task().seed for _ in range(4)})
        4
    """

    def __init__(self, env_id: str, *, fresh_seeds: bool = True, **kwargs: Any) -> None:
        super().__init__(env_id, fresh_seeds=fresh_seeds, **kwargs)
