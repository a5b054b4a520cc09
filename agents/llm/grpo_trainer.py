"""TRL's GRPO with the paper's per-step advantages, a judge's votes and a curriculum in the loop.

:class:`RLAnythingGRPOTrainer` is a ``trl.GRPOTrainer`` whose rollouts run
:class:`~agents.llm.trl_env.TaskEnvironment` tasks. After TRL has generated a batch (every
rollout to the end of its tool calls) it

1. asks the judge for m votes on every env step of every rollout (``judge(turns)`` returns
   shape (steps, m) with values in {-1, 0, 1}; ``LLMJudge(...).votes`` of
   :mod:`agents.llm.judge` fits; ``None`` means outcome only);
2. gives turn k of rollout i the integrated reward ``R_ik = O_i + lam * mean(votes)``
   (REFERENCE A1: outcome +1/-1 plus lambda times the mean vote of the step), z-scores it
   across the group's rollouts that have a turn k (population std; a turn only one rollout
   reaches keeps its raw R; a zero std gives 0), and hands TRL (B, T) per-token advantages,
   each model token carrying its turn's (the turn index counts the 0 -> 1 edges of ``tool_mask``);
3. reports each finished episode, once, to the curriculum of ``tasks`` (training batches only),
   then zeroes the advantages of rollouts the curriculum does not train on (``trains_on``, or a
   rejected proposal's ``verdict``).

TRL's own loss, clipping and KL then apply unchanged. Advantages are computed over the batch
gathered from every process, like TRL's rewards; the tests run one process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from agents.llm.advantages import token_advantages, turn_rewards, turn_steps
from agents.llm.trl_env import CurriculumTasks, TaskEnvironment, episode_result
from rla_gym.curricula.base import EpisodeResult
from rla_gym.llm import Turn
from rla_gym.stats import group_advantages

try:
    import torch
    from accelerate.utils import gather_object
    from trl import GRPOTrainer
except ImportError as error:  # pragma: no cover - the llm extra brings them
    raise ImportError("agents.llm needs the llm extra: pip install 'rla-gym[llm]'") from error

#: A judge: m votes in {-1, 0, 1} for each step of an episode, shape (steps, m).
Judge = Callable[[list[Turn]], np.ndarray]


@dataclass
class Rollout:
    """What the trainer keeps of one rollout of the last batch."""

    result: EpisodeResult
    trains: bool
    rewards: np.ndarray  #: the integrated reward of each model turn
    advantages: np.ndarray = field(default_factory=lambda: np.zeros(0))  #: each turn's advantage


class RLAnythingGRPOTrainer(GRPOTrainer):
    """GRPO on rla-gym tasks with the paper's per-step-index advantages (see the module doc).

    Takes ``GRPOTrainer``'s arguments; ``environment_factory`` defaults to
    :class:`~agents.llm.trl_env.TaskEnvironment` (a subclass works), and without a
    ``train_dataset`` the rows come from ``tasks`` (whose ``group_size`` must equal
    ``num_generations``; the dataset is then read in order, unshuffled, so that tasks are drawn
    only as they are needed). ``lam`` weighs the judge's mean vote. After each batch,
    :attr:`rollouts` holds its rollouts in generation order.
    """

    def __init__(
        self,
        model: Any,
        *,
        tasks: CurriculumTasks | None = None,
        judge: Judge | None = None,
        lam: float = 1.0,
        environment_factory: Callable[[], TaskEnvironment] = TaskEnvironment,
        train_dataset: Any = None,
        **kwargs: Any,
    ) -> None:
        if train_dataset is None:
            if tasks is None:
                raise ValueError("give the trainer tasks= (CurriculumTasks) or a train_dataset of task rows")
            train_dataset = tasks.dataset()
        if not (isinstance(lam, (int, float)) and np.isfinite(lam) and lam >= 0):
            raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
        # TRL's protocol types reset(**kwargs); ours names the task columns it needs
        factory = cast(Any, environment_factory)
        super().__init__(model=model, train_dataset=train_dataset, environment_factory=factory, **kwargs)
        if tasks is not None:
            if tasks.group_size != self.num_generations:
                raise ValueError(
                    f"tasks.group_size ({tasks.group_size}) must equal num_generations "
                    f"({self.num_generations})"
                )
            self.shuffle_dataset = False  # a shuffle buffer would draw 1000 tasks before any result
        self.tasks, self.judge, self.lam = tasks, judge, float(lam)
        self.rollouts: list[Rollout] = []
        self._completions: list[Any] = []

    def _calculate_rewards(
        self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any
    ) -> Any:
        self._completions = completions  # the message lists: which tool results follow which turn
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _votes(self, environment: TaskEnvironment) -> np.ndarray | None:
        turns = environment.turns
        if self.judge is None or not turns:
            return None
        votes = np.asarray(self.judge(turns))
        if votes.ndim != 2 or votes.shape[0] != len(turns):
            raise ValueError(f"the judge must return votes of shape ({len(turns)}, m), got {votes.shape}")
        return votes

    def _rollout(self, environment: Any, completion: Any) -> Rollout:
        if not isinstance(environment, TaskEnvironment):
            raise TypeError(f"RLAnythingGRPOTrainer needs TaskEnvironment instances, got {environment!r}")
        votes = self._votes(environment)
        steps = turn_steps(completion, environment.calls)
        rewards = turn_rewards(environment.outcome, votes, steps, self.lam)
        return Rollout(episode_result(environment, votes), environment.trains, rewards)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        model: Any = self.model
        mode = "train" if model.training else "eval"
        size: Any = self.num_generations if mode == "train" else self.num_generations_eval
        environments: list[Any] = self.environments or []
        local = [self._rollout(e, c) for e, c in zip(environments, self._completions, strict=True)]
        rollouts: list[Rollout] = gather_object(local)
        for start in range(0, len(rollouts), size):
            group = rollouts[start : start + size]
            if any(r.result.task != group[0].result.task for r in group):
                raise RuntimeError(f"a GRPO group ran different tasks: {[r.result.task for r in group]}")
            for rollout, advantages in zip(group, group_advantages([r.rewards for r in group]), strict=True):
                rollout.advantages = advantages
        if mode == "train" and self.tasks is not None:
            self.tasks.report([r.result for r in rollouts])
            for rollout in rollouts:
                if not rollout.trains or self.tasks.curriculum.verdict(rollout.result.task) is False:
                    rollout.advantages = np.zeros_like(rollout.rewards)
        self.rollouts = rollouts
        start = self.accelerator.process_index * len(local)
        mine = [r.advantages for r in rollouts[start : start + len(local)]]
        mask = output.get("tool_mask", output["completion_mask"])
        advantages = token_advantages(mask.cpu().numpy(), mine) * output["completion_mask"].cpu().numpy()
        output["advantages"] = torch.tensor(advantages, dtype=torch.float32, device=mask.device)
        self._log_rollouts(mode, rollouts)
        return output

    def _log_rollouts(self, mode: str, rollouts: list[Rollout]) -> None:
        metrics = self._metrics[mode]
        metrics["rlanything/success"].append(float(np.mean([r.result.outcome == 1 for r in rollouts])))
        metrics["rlanything/steps"].append(float(np.mean([r.result.length for r in rollouts])))
        metrics["rlanything/turns"].append(float(np.mean([len(r.rewards) for r in rollouts])))
        if mode == "train" and self.tasks is not None:
            for name, value in self.tasks.curriculum.metrics().items():
                metrics[f"curriculum/{name}"].append(float(value))
