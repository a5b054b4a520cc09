"""The TRL binding: the paper's turn advantages by hand, the task environment, curriculum rows,
and GRPO steps of a tiny offline Qwen2 on TextNav with scripted generation (marked llm)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest

from agents.llm.advantages import token_advantages, token_turns, turn_rewards, turn_steps
from rla_gym.core import Task
from rla_gym.curricula import FixedCurriculum, RewardModelBalanceCurriculum
from rla_gym.curricula.base import EpisodeResult
from rla_gym.stats import group_advantages

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ROOT = Path(__file__).resolve().parent.parent
GROUP = 4


def test_turn_advantages_match_a_hand_computation() -> None:
    # one task, three rollouts; lambda = 0.5; votes (steps, m = 2)
    # A: success, turns ran steps [0], [1], [] (a closing reply): votes +1+1, +1-1
    # B: failure, turns ran [0], [1]: votes -1-1, +1 0
    # C: success, one turn ran steps [0, 1] (two calls in one turn): votes +1+1, -1-1
    a = turn_rewards(1, [[1, 1], [1, -1]], [[0], [1], []], lam=0.5)
    b = turn_rewards(-1, [[-1, -1], [1, 0]], [[0], [1]], lam=0.5)
    c = turn_rewards(1, [[1, 1], [-1, -1]], [[0, 1]], lam=0.5)
    assert a.tolist() == [1.5, 1.0, 1.0] and b.tolist() == [-1.5, -0.75] and c.tolist() == [1.0]
    adv_a, adv_b, adv_c = group_advantages([a, b, c])
    # turn 0: R = 1.5, -1.5, 1.0; mean 1/3; population std sqrt(((7/6)^2 + (11/6)^2 + (2/3)^2) / 3)
    std0 = math.sqrt(((7 / 6) ** 2 + (11 / 6) ** 2 + (2 / 3) ** 2) / 3)
    assert adv_a[0] == pytest.approx((1.5 - 1 / 3) / std0) and adv_c[0] == pytest.approx((1.0 - 1 / 3) / std0)
    # turn 1: R = 1.0, -0.75 (C has no turn 1): z = +1, -1; turn 2: only A, keeps its raw R
    assert adv_a[1:].tolist() == pytest.approx([1.0, 1.0]) and adv_b[1] == pytest.approx(-1.0)
    # tokens: A = turn 0 (2 tokens), tool result, turn 1, tool result, turn 2; padding marked 1 by TRL
    mask = np.array([[1, 1, 0, 1, 0, 0, 1], [1, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])
    assert token_turns(mask).tolist()[0] == [0, 0, 0, 1, 1, 1, 2]
    tokens = token_advantages(mask, [adv_a, adv_b, adv_c])
    assert tokens.shape == (3, 7)
    assert tokens[0].tolist() == pytest.approx([adv_a[0], adv_a[0], 0, 1.0, 0, 0, 1.0])
    assert tokens[1].tolist() == pytest.approx([adv_b[0], 0, 0, -1.0, -1.0, -1.0, -1.0])
    assert tokens[2].tolist() == pytest.approx([adv_c[0]] * 7)


def test_tool_results_are_matched_to_the_steps_they_ran() -> None:
    completion = [
        {"role": "assistant", "tool_calls": ["act", "act"]},
        {"role": "tool", "name": "act", "content": "first"},
        {"role": "tool", "name": "act", "content": "second"},
        {"role": "assistant"},
        {"role": "tool", "name": "act", "content": "{'error': 'unexpected keyword argument'}"},
        {"role": "assistant"},
        {"role": "tool", "name": "act", "content": "first"},  # the same text again is the next call
    ]
    calls = [("first", 0), ("second", 1), ("first", 2), ("dropped by TRL", 3)]
    assert turn_steps(completion, calls) == [[0, 1], [], [2]]
    with pytest.raises(ValueError, match="votes must have shape"):
        turn_rewards(1, [[2]], [[0]])


def test_the_task_environment_runs_a_row_and_logs_its_calls() -> None:
    pytest.importorskip("datasets")
    from agents.llm.trl_env import TaskEnvironment, episode_result

    environment = TaskEnvironment()
    prompt = environment.reset(env_id="RLA-TextNav-v0", difficulty=0.0, seed=3, trains=False, prompt="x")
    assert "Commands:\n1. go north\n2. go south" in prompt and environment.task == Task(
        "RLA-TextNav-v0", 0.0, 3
    )
    assert environment.observation in prompt and not environment.trains
    dance = environment.act("dance")  # no admissible command: the no-op runs, and says so
    assert dance.startswith("Your reply named no admissible command") and not environment.turns[0].valid
    assert environment.act("2").endswith("The episode is over: you reached the goal.")  # by number
    assert environment.act("go north") == "The episode is over: no command runs."
    assert [step for _, step in environment.calls] == [0, 1, None]
    assert environment.turns[1].reply == "go south" and environment.get_reward() == 1.0
    result = episode_result(environment, np.array([[-1, -1], [1, 0]]))
    assert (result.outcome, result.length, result.episode_return) == (1, 2, 1.0)
    assert result.rm_outcome_prediction == -0.25 and result.task == environment.task
    # the same instance serves the next rollout (TRL pools them); an unfinished episode failed
    environment.reset(env_id="RLA-TextNav-v0", difficulty=0.5, seed=1)
    assert environment.calls == [] and environment.turns == [] and environment.get_reward() == -1.0
    assert episode_result(environment, np.zeros((0, 3))).rm_outcome_prediction == -1.0


def test_curriculum_rows_give_one_task_per_group_lazily() -> None:
    pytest.importorskip("datasets")
    from agents.llm.trl_env import CurriculumTasks

    curriculum = RewardModelBalanceCurriculum("RLA-TextNav-v0", start=0.5, interval=2)
    tasks = CurriculumTasks(curriculum, group_size=GROUP)
    rows = tasks.rows()
    first = next(rows)
    assert tasks.drawn == 1 and set(first) == {"env_id", "difficulty", "seed", "trains"}
    task = Task(first["env_id"], first["difficulty"], first["seed"])
    tasks.report([EpisodeResult(task, 1, 1.0, 3, rm_outcome_prediction=-0.5)] * 2)  # successes the RM doubted
    assert tasks.reported == 2 and curriculum.difficulty == 0.6
    assert next(rows)["difficulty"] == 0.6  # drawn after the update, so it sees it
    row = next(iter(tasks.dataset()))
    assert row["difficulty"] == 0.6 and tasks.drawn == 3

    class Mixed(FixedCurriculum):
        def next_group(self, slot: int, size: int) -> list[Task]:
            return [self.next_task(slot) for _ in range(size)]

    with pytest.raises(ValueError, match="different tasks"):
        next(CurriculumTasks(Mixed("RLA-TextNav-v0", 0.5), GROUP).rows())


# ---------------------------------------------------------------- GRPO with TRL (llm)
def scripted_generate(
    tokenizer: Callable[[], Any], environments: Callable[[], list[Any]], choose: Callable[[Any, int], str]
) -> Callable[..., Any]:
    """A stand-in for ``model.generate``: for rollout i, a call of the act tool with
    ``choose(environment, i)``, or a closing reply once its episode is over. TRL asks only the
    rollouts whose last reply called a tool, in order; a batch starts with every episode fresh."""
    import torch

    active: list[int] = []

    def generate(input_ids: Any, attention_mask: Any = None, generation_config: Any = None, **_: Any) -> Any:
        from agents.llm.tiny import tool_call

        envs = environments()
        if all(not e.calls for e in envs):
            active[:] = range(len(envs))
        assert len(active) == input_ids.shape[0], "a rollout stopped early: over max_completion_length?"
        texts = []
        for i in active:
            command = None if envs[i].episode.done else choose(envs[i], i)
            texts.append("I am done." if command is None else tool_call(command))
        active[:] = [i for i, text in zip(active, texts, strict=True) if text != "I am done."]
        ids = [tokenizer().encode(text + "<|im_end|>") for text in texts]
        width = max(map(len, ids))
        pad = tokenizer().pad_token_id
        completions = torch.tensor([row + [pad] * (width - len(row)) for row in ids])
        return torch.cat([input_ids, completions], dim=1)

    return generate


def oracle_command(environment: Any) -> str:
    episode = environment.episode
    return episode.commands[int(np.flatnonzero(episode.info["oracle_mask"])[0])]


class Recording(RewardModelBalanceCurriculum):
    """The rm-balance rule (AdaptiveDifficultyWrapper's), keeping what it handed out and got back."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handed: list[Task] = []
        self.results: list[EpisodeResult] = []

    def next_group(self, slot: int, size: int) -> list[Task]:
        group = super().next_group(slot, size)
        self.handed.append(group[0])
        return group

    def _learn(self, result: EpisodeResult) -> None:
        self.results.append(result)
        super()._learn(result)


@pytest.mark.llm
def test_grpo_steps_on_textnav_train_with_the_papers_turn_advantages(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    import torch
    from trl import GRPOConfig

    from agents.llm.grpo_trainer import RLAnythingGRPOTrainer
    from agents.llm.tiny import tiny_model, tiny_tokenizer
    from agents.llm.trl_env import CurriculumTasks

    torch.set_num_threads(1)
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer)
    curriculum = Recording("RLA-TextNav-v0", start=0.3, bounds=(0.1, 0.9), interval=GROUP, cooldown=0)
    tasks = CurriculumTasks(curriculum, group_size=GROUP)
    oracle_at: dict[str, str] = {}  # the oracle's command at each prompt, for the scripted judge

    def choose(environment: Any, i: int) -> str:
        best = oracle_command(environment)
        oracle_at[environment.observation] = best
        steps = len(environment.turns)
        if i % GROUP == 1 and steps == 0:
            return "look"  # one wasted turn, then the oracle
        if i % GROUP == 2 and steps == 0:
            return "dance"  # not a command: the no-op runs
        if i % GROUP == 3:  # wanders: any admissible command but the oracle's
            others = [environment.episode.commands[a] for a in environment.episode.admissible]
            return [c for c in others if c != best][steps % (len(others) - 1)]
        return best

    def judge(turns: list[Any]) -> np.ndarray:  # m = 3 votes, one left undecided
        return np.array([[1, 1, 0] if oracle_at.get(t.prompt) == t.reply else [-1, -1, 0] for t in turns])

    args = GRPOConfig(
        output_dir=str(tmp_path), num_generations=GROUP, per_device_train_batch_size=GROUP, max_steps=3,
        max_completion_length=4096, max_tool_calling_iterations=8, learning_rate=1e-2, use_cpu=True,
        report_to="none", logging_steps=1, save_strategy="no",
    )  # fmt: skip
    trainer = RLAnythingGRPOTrainer(
        model=model, processing_class=tokenizer, args=args, tasks=tasks, judge=judge, lam=0.5
    )
    before = [p.detach().clone() for p in model.parameters()]
    batches: list[tuple[dict[str, Any], list[Any]]] = []
    losses: list[float] = []
    score, loss_of = trainer._generate_and_score_completions, trainer._compute_loss

    def keep_batch(inputs: Any) -> Any:
        output = score(inputs)
        batches.append((output, list(trainer.rollouts)))
        return output

    def keep_loss(model: Any, inputs: Any) -> Any:
        loss = loss_of(model, inputs)
        losses.append(loss.item())
        return loss

    generate = scripted_generate(lambda: tokenizer, lambda: trainer.environments, choose)
    with (
        patch.object(trainer.model, "generate", side_effect=generate),
        patch.object(trainer, "_generate_and_score_completions", side_effect=keep_batch),
        patch.object(trainer, "_compute_loss", side_effect=keep_loss),
    ):
        trainer.train()

    assert len(losses) == 3 and all(math.isfinite(loss) for loss in losses)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    logs = [entry for entry in trainer.state.log_history if "tools/call_frequency" in entry]
    assert len(logs) == 3 and all(entry["tools/call_frequency"] >= 2 for entry in logs)
    for output, rollouts in batches:
        advantages, mask = output["advantages"], output["tool_mask"] * output["completion_mask"]
        assert advantages.shape == output["completion_ids"].shape == (GROUP, advantages.shape[1])
        turns = token_turns(output["tool_mask"].numpy())
        for b, rollout in enumerate(rollouts):  # every model token carries its turn's advantage
            model_tokens = mask[b].bool().numpy()
            assert advantages[b].numpy()[model_tokens] == pytest.approx(
                rollout.advantages[turns[b, model_tokens]]
            )
        rewards = [r.rewards for r in rollouts]
        for k in range(max(map(len, rewards))):  # the z-score across the rollouts that reach turn k
            reach = [i for i, r in enumerate(rewards) if len(r) > k]
            values = np.array([rewards[i][k] for i in reach])
            expected = values if len(reach) == 1 else (values - values.mean()) / (values.std() or np.inf)
            assert [rollouts[i].advantages[k] for i in reach] == pytest.approx(expected)
        differs = [len(set(advantages[b][mask[b].bool()].tolist())) > 1 for b in range(GROUP)]
        assert any(differs)  # advantages differ across the turns of a rollout
        oracle = rollouts[0]
        assert oracle.result.outcome == 1 and oracle.rewards[0] == pytest.approx(1 + 0.5 * 2 / 3)
    # every finished episode reached the curriculum once, attributed to the task its row handed out
    assert [r.task for r in curriculum.results] == [t for t in curriculum.handed[:3] for _ in range(GROUP)]
    assert tasks.reported == 12 and tasks.drawn == len(curriculum.handed) <= 4
    assert all(r.rm_outcome_prediction is not None and r.rm_votes is not None for r in curriculum.results)
    assert curriculum.last and "balance" in curriculum.last  # the rule decided on the judge's predictions


def llm_page_trl_example() -> str:
    page = (ROOT / "docs" / "llm.md").read_text()
    (code,) = [block for block in re.findall(r"```python\n(.*?)```", page, flags=re.S) if "Trainer" in block]
    return code


@pytest.mark.llm
def test_the_llm_page_trl_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("trl")
    import torch
    from transformers import Qwen2ForCausalLM

    torch.set_num_threads(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    generate = scripted_generate(
        lambda: namespace["tokenizer"],
        lambda: namespace["trainer"].environments,
        lambda e, i: oracle_command(e),
    )
    with patch.object(Qwen2ForCausalLM, "generate", side_effect=generate):
        exec(compile(llm_page_trl_example(), "llm.md", "exec"), namespace)
    tasks, trainer = namespace["tasks"], namespace["trainer"]
    assert tasks.curriculum.episodes == 2 * GROUP and all(r.result.outcome == 1 for r in trainer.rollouts)
