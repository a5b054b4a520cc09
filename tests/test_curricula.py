"""Each strategy's rule on hand-computed cases, parameter validation, and exact resume."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rla_gym.core import Task
from rla_gym.curricula import (
    CURRICULA,
    EpisodeResult,
    FixedCurriculum,
    FreshTaskPoolCurriculum,
    LearnabilityCurriculum,
    LearningProgressCurriculum,
    PrioritizedLevelReplay,
    RewardModelBalanceCurriculum,
    SuccessBandCurriculum,
    TaskPoolCurriculum,
    UniformCurriculum,
)
from rla_gym.curricula.plr import gae

ENV = "RLA-TextNav-v0"


def result(task: Task, outcome: int, **kwargs) -> EpisodeResult:
    return EpisodeResult(task, outcome, 1.0 if outcome == 1 else 0.0, 5, **kwargs)


def feed(curriculum, outcomes, **kwargs) -> None:
    for outcome in outcomes:
        curriculum.update(result(curriculum.next_task(), outcome, **kwargs))


# ---------------------------------------------------------------- fixed / uniform
def test_fixed_and_uniform_draw_fresh_training_seeds() -> None:
    fixed = FixedCurriculum(ENV, 0.3, seed=1)
    tasks = [fixed.next_task() for _ in range(100)]
    assert {t.difficulty for t in tasks} == {0.3} and len({t.seed for t in tasks}) == 100
    assert all(t.seed < 2**30 for t in tasks)  # never the held-out range
    uniform = UniformCurriculum(ENV, bounds=(0.2, 0.6))
    ds = [uniform.next_task().difficulty for _ in range(500)]
    assert 0.2 <= min(ds) < 0.25 and 0.55 < max(ds) <= 0.6


# ---------------------------------------------------------------- success band
def test_success_band_steps_up_down_and_ignores_stale_episodes() -> None:
    c = SuccessBandCurriculum(ENV, window=4, step=0.1)
    stale = c.next_task()  # assigned at d = 0, finishes after the move
    feed(c, [1, 1, 1, 1])  # rate 1.0 >= 0.8
    assert c.difficulty == 0.1
    c.update(result(stale, -1))  # d = 0 episode: must not count at d = 0.1
    assert c.recent == []
    feed(c, [1, -1, 1, -1])  # rate 0.5: inside the band, no move
    assert c.difficulty == 0.1
    feed(c, [-1, -1, -1, -1])  # window slides to rate 0 <= 0.2
    assert c.difficulty == 0.0
    feed(c, [-1] * 8)  # at the lower bound: stays
    assert c.difficulty == 0.0 and c.moves == 2


def test_success_band_edges_are_inclusive() -> None:
    c = SuccessBandCurriculum(ENV, window=5, step=0.1)
    feed(c, [1, 1, 1, 1, -1])  # rate 0.8, exactly alpha_high: up
    assert c.difficulty == 0.1
    feed(c, [1, -1, -1, -1, -1])  # rate 0.2, exactly alpha_low: down
    assert c.difficulty == 0.0 and c.moves == 2


def test_success_band_window_slides_until_a_move() -> None:
    """A judgement that keeps d keeps the window: the next episode judges the last ``window``."""
    c = SuccessBandCurriculum(ENV, window=4, step=0.1)
    feed(c, [-1, 1, 1, 1])  # rate 0.75: inside the band
    assert c.difficulty == 0.0 and c.recent == [0, 1, 1, 1]
    feed(c, [1])  # the window slides to [1, 1, 1, 1]
    assert c.difficulty == 0.1 and c.recent == []


# ---------------------------------------------------------------- RM balance
def test_rm_balance_direction_cooldown_and_bounds() -> None:
    c = RewardModelBalanceCurriculum(ENV, interval=4, start=0.5, cooldown=1)
    feed(c, [-1] * 4, rm_outcome_prediction=0.5)  # errors +1.5: p_over = 1, failures dominate -> lower
    assert c.difficulty == 0.4 and c.last["decision"] == "lower"
    feed(c, [1] * 4, rm_outcome_prediction=-0.5)  # p_under = 1, but cooling down
    assert c.difficulty == 0.4 and c.last["decision"] == "cooldown"
    feed(c, [1] * 4, rm_outcome_prediction=-0.5)  # now successes dominate -> raise
    assert c.difficulty == 0.5 and c.last["decision"] == "raise"
    c.cooldown_left = 0
    for outcome, pred in [(1, 0.2), (1, 0.2), (-1, -0.2), (-1, -0.2)]:  # 2 under, 2 over: balance 1 > 0.8
        c.update(result(c.next_task(), outcome, rm_outcome_prediction=pred))
    assert c.difficulty == 0.5 and c.last["decision"] == "keep" and c.last["balance"] == 1.0
    top = RewardModelBalanceCurriculum(ENV, interval=2, start=1.0, cooldown=0)
    feed(top, [1, 1], rm_outcome_prediction=-1.0)
    assert top.difficulty == 1.0 and top.last["decision"] == "at bound"


def test_rm_balance_threshold_is_strict() -> None:
    c = RewardModelBalanceCurriculum(ENV, interval=10, start=0.5, cooldown=0)
    for outcome, pred in [(-1, 0.0)] * 5 + [(1, 0.0)] * 4 + [(1, 1.0)]:  # p_over 0.5, p_under 0.4
        c.update(result(c.next_task(), outcome, rm_outcome_prediction=pred))
    assert c.last["balance"] == 0.8  # not above the threshold 0.8: failures dominate, lower
    assert c.difficulty == 0.4 and c.last["decision"] == "lower"


def test_rm_balance_keeps_errors_without_a_direction_even_at_threshold_one() -> None:
    """p_over == p_under (here a perfect RM, balance 1.0) gives no direction to move in."""
    c = RewardModelBalanceCurriculum(ENV, interval=4, start=0.5, cooldown=0, balance_threshold=1.0)
    feed(c, [1] * 4, rm_outcome_prediction=1.0)  # no error at all
    assert (c.last["p_over"], c.last["p_under"], c.last["balance"]) == (0.0, 0.0, 1.0)
    assert c.last["decision"] == "keep" and c.difficulty == 0.5
    for outcome, pred in [(1, 0.0), (-1, 0.0)] * 2:  # one over, one under: balance 1.0 again
        c.update(result(c.next_task(), outcome, rm_outcome_prediction=pred))
    assert c.last["decision"] == "keep" and c.difficulty == 0.5 and c.changes == 0


def test_rm_balance_ignores_episodes_at_another_difficulty() -> None:
    c = RewardModelBalanceCurriculum(ENV, interval=2, start=0.5, cooldown=0)
    stale = c.next_task()  # assigned at d = 0.5, finishes after the move
    feed(c, [-1, -1], rm_outcome_prediction=0.5)  # p_over = 1: lower
    assert c.difficulty == 0.4
    c.update(result(stale, -1, rm_outcome_prediction=0.5))  # must not count at d = 0.4
    assert c.predicted == [] and c.actual == []


def test_rm_balance_literal_direction_is_the_notes_code() -> None:
    c = RewardModelBalanceCurriculum(ENV, interval=4, start=0.5, cooldown=0, direction="literal")
    feed(c, [-1] * 4, rm_outcome_prediction=0.5)  # p_over = 1 -> the notes raise d
    assert c.difficulty == 0.6 and c.last["decision"] == "raise"
    feed(c, [1] * 4, rm_outcome_prediction=-0.5)  # p_under = 1 -> lower
    assert c.difficulty == 0.5 and c.last["decision"] == "lower"


def test_rm_balance_needs_predictions() -> None:
    c = RewardModelBalanceCurriculum(ENV)
    with pytest.raises(ValueError, match="needs EpisodeResult.rm_outcome_prediction, got None"):
        c.update(result(c.next_task(), 1))
    with pytest.raises(ValueError, match="rm_outcome_prediction must be in \\[-1, 1\\], got nan"):
        result(c.next_task(), 1, rm_outcome_prediction=float("nan"))


# ---------------------------------------------------------------- task pool
def _pool_round(c: TaskPoolCurriculum, successes: int) -> None:
    feed(c, [1] * successes + [-1] * (c.rollouts - successes))


@pytest.mark.parametrize(
    ("first", "second", "accepted"),
    [
        (10, 5, True),
        (10, 2, True),
        (10, 1, False),
        (10, 0, False),
        (8, 8, False),
        (9, 9, False),
        (8, 7, True),
    ],
)
def test_task_pool_harder_acceptance(first: int, second: int, accepted: bool) -> None:
    c = TaskPoolCurriculum(ENV, dataset_size=None, pool_size=1, rollouts_per_task=10, start=0.5)
    _pool_round(c, first)  # acc >= 0.8: a harder variant becomes pending
    proposal = c.slots[0]["phase"]
    assert (
        c.is_pending(proposal) and proposal.difficulty == 0.6 and proposal.seed == c.slots[0]["active"].seed
    )
    _pool_round(c, second)  # accepted iff 0.2 <= acc' < acc and acc' > 0
    assert (c.slots[0]["active"] == proposal) == accepted
    assert (c.accepted, c.rejected) == ((1, 0) if accepted else (0, 1))
    assert c.history[-1]["accepted"] == accepted and not c.is_pending(proposal)


@pytest.mark.parametrize(
    ("first", "second", "accepted"), [(2, 5, True), (0, 8, True), (2, 9, False), (2, 2, False), (1, 0, False)]
)
def test_task_pool_easier_acceptance(first: int, second: int, accepted: bool) -> None:
    c = TaskPoolCurriculum(ENV, dataset_size=None, pool_size=1, rollouts_per_task=10, start=0.5)
    _pool_round(c, first)  # acc <= 0.2: an easier variant
    assert c.slots[0]["phase"].difficulty == 0.4
    _pool_round(c, second)  # accepted iff acc < acc' <= 0.8 and acc' > 0
    assert (c.slots[0]["active"].difficulty == 0.4) == accepted


def test_task_pool_keeps_mid_accuracy_tasks_and_serves_slots_evenly() -> None:
    c = TaskPoolCurriculum(ENV, pool_size=3, rollouts_per_task=4)
    served = [c.next_task() for _ in range(6)]
    assert [served.count(s["active"]) for s in c.slots] == [2, 2, 2]
    one = TaskPoolCurriculum(ENV, dataset_size=None, pool_size=1, rollouts_per_task=4, start=0.3)
    _pool_round(one, 2)  # acc 0.5: nothing proposed
    assert one.slots[0]["direction"] == 0 and one.slots[0]["acc"] == 0.5 and not one.history


@pytest.mark.parametrize("cls", [TaskPoolCurriculum, FreshTaskPoolCurriculum])
@pytest.mark.parametrize("n_envs", [1, 2, 4])
def test_task_pool_shares_rollouts_evenly_with_episodes_in_flight(cls, n_envs: int) -> None:
    # envs finish in random order; a judged slot must not take over the pool (it did: slots
    # waiting one rollout short of a round were never served again)
    rng = np.random.default_rng(n_envs)
    c = cls(ENV, pool_size=8, rollouts_per_task=8, seed=0)
    in_flight = [c.next_task(i) for i in range(n_envs)]
    served = []
    for _ in range(4000):
        i = int(rng.integers(n_envs))
        served.append(next(k for k, s in enumerate(c.slots) if c._slot_of(in_flight[i]) is s))
        c.update(result(in_flight[i], 1 if rng.random() < 0.5 else -1))
        in_flight[i] = c.next_task(i)
    shares = np.bincount(served, minlength=8) / len(served)
    assert shares.min() > 0.1 and shares.max() < 0.15, shares


def test_task_pool_rm_scaled_step() -> None:
    c = TaskPoolCurriculum(
        ENV, dataset_size=None, pool_size=1, rollouts_per_task=4, start=0.2, step=0.1, rm_scaled_step=True
    )
    feed(c, [1] * 4, rm_outcome_prediction=0.0)  # every error negative: balance 0 -> step 0.2
    assert math.isclose(c.slots[0]["phase"].difficulty, 0.4)


def test_task_pool_step_search_doubles_halves_and_resets_the_scale() -> None:
    """A rejected proposal that did not go far enough doubles the slot's next step, one that
    overshot the band halves it, an acceptance resets it."""
    c = TaskPoolCurriculum(ENV, dataset_size=None, pool_size=1, rollouts_per_task=4, start=0.5, step=0.1)
    slot = c.slots[0]
    rounds = [  # (successes in the round, the slot's scale after it, the task it runs next)
        (4, 1.0, 0.6),  # acc 1: harder proposed, one step
        (4, 2.0, 0.5),  # acc' 1, not below acc: rejected, not far enough
        (4, 2.0, 0.7),  # harder proposed, two steps
        (0, 1.0, 0.5),  # acc' 0 < alpha_low: rejected, overshot
        (4, 1.0, 0.6),
        (0, 0.5, 0.5),  # overshot again
        (4, 0.5, 0.55),
        (2, 1.0, 0.55),  # acc' 0.5: accepted
        (0, 1.0, 0.45),  # acc 0: easier proposed
        (0, 2.0, 0.55),  # acc' 0, still unsolved: rejected, not far enough
        (0, 2.0, 0.35),
        (4, 1.0, 0.55),  # acc' 1 > alpha_high: rejected, overshot
    ]
    for successes, scale, difficulty in rounds:
        _pool_round(c, successes)
        assert (slot["scale"], slot["phase"].difficulty) == (scale, difficulty)


def test_task_pool_step_scale_stays_within_its_clamp() -> None:
    c = TaskPoolCurriculum(ENV, dataset_size=None, pool_size=1, rollouts_per_task=2, start=0.5)
    for _ in range(6):  # every harder proposal overshoots (acc' 0 < 0.2): halved each time
        _pool_round(c, 2)
        _pool_round(c, 0)
    assert c.slots[0]["scale"] == 0.125 and c.rejected == 6


def test_task_pool_moves_on_after_max_tries_rejections() -> None:
    c = TaskPoolCurriculum(ENV, pool_size=1, rollouts_per_task=2, dataset_size=4, start=0.5, max_tries=1)
    _pool_round(c, 2)  # acc 1: harder proposed
    assert c.slots[0]["direction"] == 1
    _pool_round(c, 2)  # acc' 1: rejected, the first try
    assert c.rejected == 1 and c.draws == 1
    _pool_round(c, 2)  # acc 1 again, but max_tries are used up: the slot draws another task
    assert c.slots[0]["direction"] == 0 and c.draws == 2


def test_task_pool_accepted_variant_replaces_its_original_in_the_data_set() -> None:
    c = TaskPoolCurriculum(ENV, pool_size=1, rollouts_per_task=2, dataset_size=4, start=0.5)
    slot = c.slots[0]
    original = slot["active"]
    assert c.dataset[slot["index"]] == original
    _pool_round(c, 2)  # acc 1: harder proposed
    _pool_round(c, 1)  # acc' 0.5: accepted
    assert slot["active"].difficulty == 0.6 and slot["active"].seed == original.seed
    assert c.dataset[slot["index"]] == slot["active"] and original not in c.dataset


def test_task_pool_slots_never_hold_the_same_data_set_task() -> None:
    """Two slots on one task could not tell their rollouts apart; with as many tasks as slots
    every slot holds its own index, from the start and through every redraw."""
    c = TaskPoolCurriculum(ENV, pool_size=8, rollouts_per_task=2, dataset_size=8, start=0.5)
    for _ in range(50):
        assert sorted(s["index"] for s in c.slots) == list(range(8))
        feed(c, [1, -1] * 8)
    assert c.draws > 8  # slots did redraw


def test_fresh_task_pool_gives_a_verdict_on_every_task_it_judged() -> None:
    c = FreshTaskPoolCurriculum(ENV, pool_size=1, rollouts_per_task=2, start=0.5)
    active = [c.next_task() for _ in range(2)]
    for task in active:  # acc 1: harder proposed; no proposal judged yet
        c.update(result(task, 1))
    assert [c.verdict(t) for t in active] == [None, None]
    accepted = [c.next_task() for _ in range(2)]  # two fresh tasks at the proposed 0.6
    for task, outcome in zip(accepted, (1, -1), strict=True):  # acc' 0.5: accepted
        c.update(result(task, outcome))
    assert [c.verdict(t) for t in accepted] == [True, True]
    assert [c.verdict(t) for t in accepted] == [None, None]  # read once
    _pool_round(c, 2)  # acc 1 at 0.6: harder proposed
    rejected = [c.next_task() for _ in range(2)]
    for task in rejected:  # acc' 1, not below acc: rejected
        c.update(result(task, 1))
    assert [c.verdict(t) for t in rejected] == [False, False]


def test_fresh_task_pool_adapts_a_level_over_new_tasks() -> None:
    c = FreshTaskPoolCurriculum(ENV, pool_size=2, rollouts_per_task=4, start=0.5, seed=3)
    served = [c.next_task() for _ in range(8)]
    assert len({t.seed for t in served}) == 8 and {t.difficulty for t in served} == {0.5}
    assert all(t.seed < 2**30 for t in served)  # never the held-out range
    first = c.slots[0]
    for task in served[::2]:  # slot 0's four tasks all succeed: a harder level is proposed
        c.update(result(task, 1))
    assert first["direction"] == 1 and first["phase"].difficulty == 0.6
    proposal_tasks = [c.next_task() for _ in range(2)]  # slot 0 has the fewest assignments
    assert {t.difficulty for t in proposal_tasks} == {0.6} and all(c.is_pending(t) for t in proposal_tasks)
    c.update(result(served[1], -1))  # slot 1's round goes on: its task still counts
    assert c.slots[1]["outcomes"] == [-1]
    c.update(result(served[0], 1))  # slot 0's old round is over: stale, not evidence
    assert c.stale == 1 and first["outcomes"] == []


def test_fresh_task_pool_accepts_by_the_same_rule() -> None:
    c = FreshTaskPoolCurriculum(ENV, dataset_size=None, pool_size=1, rollouts_per_task=4, start=0.5)
    _pool_round(c, 4)  # acc 1.0: harder proposed
    _pool_round(c, 2)  # acc' 0.5 in [0.2, 1.0): accepted
    assert c.slots[0]["active"].difficulty == 0.6 and (c.accepted, c.rejected) == (1, 0)
    _pool_round(c, 0)  # acc 0: easier proposed
    _pool_round(c, 0)  # acc' 0: never accepted (unsolvable)
    assert c.slots[0]["active"].difficulty == 0.6 and c.rejected == 1
    with pytest.raises(TypeError, match="fresh_seeds must be a bool, got 1"):
        TaskPoolCurriculum(ENV, fresh_seeds=1)


# ---------------------------------------------------------------- PLR
def test_plr_weights_by_hand() -> None:
    c = PrioritizedLevelReplay(ENV, score="external", temperature=1.0, staleness_coef=0.5, replay_prob=0.0)
    for s in (0.2, 0.8, 0.5):
        c.update(result(c.next_task(), 1, score=s))
    # ranks: 0.8 -> 1, 0.5 -> 2, 0.2 -> 3; h = 1/rank normalised by 11/6
    by_score = np.array([1 / 3, 1, 1 / 2]) / (11 / 6)
    stale = np.array([3 - 1, 3 - 2, 3 - 3]) / 3  # clock 3, levels entered at clocks 1, 2, 3
    assert np.allclose(c.sampling_weights(), 0.5 * by_score + 0.5 * stale)


def test_plr_fill_ratio_replacement_and_replay() -> None:
    c = PrioritizedLevelReplay(ENV, score="external", buffer_size=2, min_fill_ratio=1.0, replay_prob=1.0)
    first = c.next_task()
    c.update(result(first, 1, score=0.1))
    assert c.next_task() != first  # half full < min fill ratio 1.0: a new task
    c.update(result(c.next_task(), 1, score=0.5))
    newcomer = Task(ENV, 0.5, 123)
    c.update(result(newcomer, 1, score=0.3))  # beats the lowest (0.1): replaces it
    assert {level["task"] for level in c.levels} >= {newcomer} and first not in {
        lv["task"] for lv in c.levels
    }
    c.update(result(Task(ENV, 0.5, 124), 1, score=0.05))  # too low to enter
    assert len(c.levels) == 2
    buffered = {level["task"] for level in c.levels}
    assert all(c.next_task() in buffered for _ in range(20))  # full and replay_prob 1: replay only


def test_plr_replay_refreshes_the_levels_staleness() -> None:
    c = PrioritizedLevelReplay(
        ENV, score="external", buffer_size=2, min_fill_ratio=1.0, replay_prob=1.0, staleness_coef=1.0
    )
    for s in (0.1, 0.2):
        c.update(result(c.next_task(), 1, score=s))
    replayed = c.next_task()  # clock 3: the buffer is full, a replay
    level = next(lv for lv in c.levels if lv["task"] == replayed)
    assert level["last"] == c.clock == 3
    assert c.sampling_weights()[c.levels.index(level)] == 0.0  # drawn just now: not stale at all


def test_plr_a_tie_with_the_lowest_score_does_not_evict() -> None:
    c = PrioritizedLevelReplay(ENV, score="external", buffer_size=1, replay_prob=0.0)
    first = c.next_task()
    c.update(result(first, 1, score=0.3))
    c.update(result(Task(ENV, 0.5, 99), 1, score=0.3))  # equal, not higher
    assert [lv["task"] for lv in c.levels] == [first]


def test_plr_level_score_is_its_latest_episodes_score() -> None:
    c = PrioritizedLevelReplay(ENV, score="external", replay_prob=0.0)
    task = c.next_task()
    for s in (0.9, 0.2):
        c.update(result(task, 1, score=s))
    assert c.levels[0]["score"] == 0.2 and c.levels[0]["count"] == 2  # the latest, not the highest


def test_plr_max_mc_scores_from_the_best_return_seen() -> None:
    c = PrioritizedLevelReplay(ENV, score="max_mc")
    task, values = Task(ENV, 0.2, 5), np.array([0.0, 0.0])
    c.update(EpisodeResult(task, 1, 1.0, 2, value_estimates=values))  # best return 1.0
    again = EpisodeResult(task, -1, 0.0, 2, value_estimates=values)
    assert c.episode_score(again) == 1.0  # mean(best 1.0 - V), not mean(this return 0.0 - V)


def test_plr_value_l1_is_the_mean_absolute_advantage() -> None:
    c = PrioritizedLevelReplay(ENV, score="value_l1", gamma=1.0, gae_lambda=1.0)
    r = EpisodeResult(Task(ENV, 0.1, 1), -1, 0.0, 2, value_estimates=np.array([1.0, 1.0]))
    assert c.episode_score(r) == pytest.approx(1.0)  # advantages [-1, -1]


def test_plr_positive_value_loss_and_missing_inputs() -> None:
    values = np.array([0.5, 0.6, 0.7])
    adv = gae(values, np.array([0.0, 0.0, 1.0]), 0.9, 0.5)
    d = [0.9 * 0.6 - 0.5, 0.9 * 0.7 - 0.6, 1.0 - 0.7]
    assert np.allclose(adv, [d[0] + 0.45 * (d[1] + 0.45 * d[2]), d[1] + 0.45 * d[2], d[2]])
    c = PrioritizedLevelReplay(ENV, gamma=0.9, gae_lambda=0.5)
    r = EpisodeResult(Task(ENV, 0.1, 1), 1, 1.0, 3, value_estimates=values)  # sparse reward on the last step
    assert math.isclose(c.episode_score(r), float(np.maximum(adv, 0).mean()))
    with pytest.raises(ValueError, match="needs EpisodeResult.value_estimates"):
        c.update(result(c.next_task(), 1))
    with pytest.raises(ValueError, match="needs EpisodeResult.rm_outcome_prediction"):
        PrioritizedLevelReplay(ENV, score="rm_error").update(result(Task(ENV, 0, 1), 1))
    assert (
        PrioritizedLevelReplay(ENV, score="rm_error").episode_score(
            result(Task(ENV, 0, 1), -1, rm_outcome_prediction=0.5)
        )
        == 1.5
    )


# ---------------------------------------------------------------- learning progress
def test_task_pool_variants_stay_within_bounds() -> None:
    c = TaskPoolCurriculum(
        ENV, dataset_size=None, pool_size=1, rollouts_per_task=2, start=0.45, step=0.1, bounds=(0.0, 0.5)
    )
    _pool_round(c, 2)  # acc 1.0: harder, but capped at the upper bound
    assert c.slots[0]["phase"].difficulty == 0.5
    _pool_round(c, 1)  # acc' 0.5: accepted; now at the bound, so no harder proposal follows
    _pool_round(c, 2)
    assert c.slots[0]["active"].difficulty == 0.5 and c.slots[0]["direction"] == 0


def test_learning_progress_bins_split_its_bounds() -> None:
    c = LearningProgressCurriculum(ENV, bins=4, bounds=(0.2, 0.6), seed=3)
    drawn = [c.next_task().difficulty for _ in range(200)]
    assert min(drawn) >= 0.2 and max(drawn) <= 0.6 and max(drawn) > 0.5
    assert [c.bin_of(d) for d in (0.0, 0.2, 0.35, 0.45, 0.59, 0.9)] == [0, 0, 1, 2, 3, 3]


def test_learning_progress_ema_by_hand_and_sampling() -> None:
    c = LearningProgressCurriculum(ENV, bins=2, ema_alpha=0.5, explore=0.0)
    c.update(result(Task(ENV, 0.1, 1), 1))  # bin 0: fast 0.5, slow 0.25
    c.update(result(Task(ENV, 0.1, 2), 1))  # fast 0.75, slow 0.5
    assert (c.fast[0], c.slow[0]) == (0.75, 0.5)
    assert c.weights().tolist() == [0.5, 0.5]  # bin 1 unseen gets the largest progress, 0.25
    c.update(result(Task(ENV, 0.9, 3), -1))  # bin 1: fast 0, slow 0: no progress
    assert c.weights().tolist() == [1.0, 0.0]
    assert all(c.next_task().difficulty < 0.5 for _ in range(50))


def test_learning_progress_mixes_in_a_uniform_share() -> None:
    c = LearningProgressCurriculum(ENV, bins=2, ema_alpha=0.5, explore=0.2)
    c.update(result(Task(ENV, 0.1, 1), 1))  # bin 0: fast 0.5, slow 0.25
    c.update(result(Task(ENV, 0.9, 2), -1))  # bin 1: seen, no progress
    assert c.weights() == pytest.approx([0.8 * 1.0 + 0.2 * 0.5, 0.8 * 0.0 + 0.2 * 0.5])


def test_learning_progress_draws_within_the_chosen_bins_edges() -> None:
    c = LearningProgressCurriculum(ENV, bins=4, bounds=(0.2, 0.6), explore=0.0)
    for d, outcome in [(0.25, -1), (0.35, -1), (0.45, 1), (0.55, -1)]:  # progress in bin 2 only
        c.update(result(Task(ENV, d, 1), outcome))
    assert c.weights().tolist() == [0.0, 0.0, 1.0, 0.0]
    drawn = [c.next_task().difficulty for _ in range(200)]
    assert 0.4 <= min(drawn) < 0.41 and 0.49 < max(drawn) <= 0.5  # bin 2 is [0.4, 0.5]


# ---------------------------------------------------------------- learnability
def test_learnability_refreshes_its_buffer_every_interval_training_episodes() -> None:
    c = LearnabilityCurriculum(ENV, candidates=2, rollouts=2, buffer_size=1, interval=3)
    first = [c.next_task() for _ in range(4)]  # two candidates, two evaluation rollouts each
    for task, outcome in zip(first, (1, -1, 1, 1), strict=True):  # p (1 - p): 1/4 and 0
        c.update(result(task, outcome))
    assert c.buffer == [first[0]] and c.refreshes == 1
    feed(c, [1, 1])  # two training episodes: not yet
    assert not c.queue and not c.evaluating
    feed(c, [1])  # the third: new candidates are drawn
    assert len(c.queue) == 4 and len(c.evaluating) == 2 and c.since_refresh == 0
    second = [c.next_task() for _ in range(4)]
    assert not any(c.trains_on(t) for t in second) and first[0] not in second
    for task, outcome in zip(second, (-1, -1, 1, -1), strict=True):
        c.update(result(task, outcome))
    assert c.buffer == [second[2]] and c.refreshes == 2


@pytest.mark.parametrize(("share", "low", "high"), [(0.0, 0.0, 0.0), (0.9, 0.85, 0.95), (1.0, 1.0, 1.0)])
def test_learnability_draws_buffer_share_of_training_tasks_from_its_buffer(
    share: float, low: float, high: float
) -> None:
    c = LearnabilityCurriculum(
        ENV, candidates=2, rollouts=1, buffer_size=1, buffer_share=share, interval=10**6
    )
    feed(c, [1, -1])  # the candidates' evaluation rollouts fill the buffer
    drawn = [c.next_task() for _ in range(1000)]
    assert low <= np.mean([t in c.buffer for t in drawn]) <= high


# ---------------------------------------------------------------- validation
BAD = [
    (
        SuccessBandCurriculum,
        {"alpha_low": 0.8, "alpha_high": 0.2},
        ValueError,
        "alpha_low must be < alpha_high",
    ),
    (SuccessBandCurriculum, {"step": 0.0}, ValueError, "step must be > 0, got 0.0"),
    (SuccessBandCurriculum, {"step": float("nan")}, ValueError, "step must be > 0, got nan"),
    (SuccessBandCurriculum, {"bounds": (0.5, 0.2)}, ValueError, "bounds\\[0\\] must be < bounds\\[1\\]"),
    (SuccessBandCurriculum, {"window": 0}, ValueError, "window must be > 0, got 0"),
    (RewardModelBalanceCurriculum, {"interval": 0}, ValueError, "interval must be > 0, got 0"),
    (
        RewardModelBalanceCurriculum,
        {"bounds": (-0.1, 1.0)},
        ValueError,
        "bounds\\[0\\] must be in \\[0, 1\\], got -0.1",
    ),
    (
        RewardModelBalanceCurriculum,
        {"bounds": (0.1, 1.5)},
        ValueError,
        "bounds\\[1\\] must be in \\[0, 1\\], got 1.5",
    ),
    (
        RewardModelBalanceCurriculum,
        {"balance_threshold": float("nan")},
        ValueError,
        "balance_threshold .* got nan",
    ),
    (RewardModelBalanceCurriculum, {"start": 0.05}, ValueError, "start must lie within bounds"),
    (RewardModelBalanceCurriculum, {"cooldown": -1}, ValueError, "cooldown must be a non-negative integer"),
    (RewardModelBalanceCurriculum, {"direction": "up"}, ValueError, "direction must be one of .* got 'up'"),
    (TaskPoolCurriculum, {"alpha_low": 0.5, "alpha_high": 0.5}, ValueError, "alpha_low must be < alpha_high"),
    (TaskPoolCurriculum, {"pool_size": 2.5}, TypeError, "pool_size must be a positive integer, got 2.5"),
    (PrioritizedLevelReplay, {"score": "regret"}, ValueError, "score must be one of"),
    (PrioritizedLevelReplay, {"replay_prob": 1.5}, ValueError, "replay_prob must be in \\[0, 1\\], got 1.5"),
    (PrioritizedLevelReplay, {"temperature": 0}, ValueError, "temperature must be > 0, got 0"),
    (LearningProgressCurriculum, {"ema_alpha": 0.0}, ValueError, "ema_alpha must be > 0"),
    (LearningProgressCurriculum, {"bounds": (0.5, 0.5)}, ValueError, "bounds\\[0\\] must be < bounds"),
    (TaskPoolCurriculum, {"start": 0.8, "bounds": (0.0, 0.5)}, ValueError, "start must lie within bounds"),
    (UniformCurriculum, {"bounds": (0.7, 0.3)}, ValueError, "bounds\\[0\\] must be < bounds\\[1\\]"),
    (LearnabilityCurriculum, {"candidates": 4, "buffer_size": 8}, ValueError, "buffer_size 8 > candidates 4"),
    (FixedCurriculum, {"difficulty": float("nan")}, ValueError, "difficulty must be in \\[0, 1\\], got nan"),
]


@pytest.mark.parametrize(("cls", "kwargs", "error", "match"), BAD)
def test_bad_parameters_are_named(cls, kwargs, error, match) -> None:
    if cls is FixedCurriculum:
        kwargs = {"difficulty": kwargs["difficulty"]}
    with pytest.raises(error, match=match):
        cls(ENV, **kwargs)


def test_results_for_another_env_are_refused() -> None:
    with pytest.raises(ValueError, match="serves 'RLA-TextNav-v0'"):
        FixedCurriculum(ENV, 0.1).update(result(Task("RLA-Other-v0", 0.1, 1), 1))
    with pytest.raises(TypeError, match="update takes an EpisodeResult, got 'x'"):
        FixedCurriculum(ENV, 0.1).update("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="value_estimates must be 1-D .*, got shape \\(2, 3\\)"):
        result(Task(ENV, 0.1, 1), 1, value_estimates=np.zeros((2, 3)))


# ---------------------------------------------------------------- state round trip
def _make(name: str):
    kwargs = {
        "fixed": {"difficulty": 0.2},
        "plr": {"buffer_size": 8},
        "task-pool": {"pool_size": 3, "rollouts_per_task": 3},
        "task-pool-fresh": {"pool_size": 3, "rollouts_per_task": 3},
        "rm-balance": {"interval": 4},
        "success-band": {"window": 4},
    }.get(name, {})
    return CURRICULA[name](ENV, seed=7, **kwargs)


def _synthetic(task: Task, k: int) -> EpisodeResult:
    """A deterministic episode outcome that makes every strategy move."""
    success = (task.seed + k) % 3 != 0 if task.difficulty < 0.5 else (task.seed + k) % 4 == 0
    return EpisodeResult(
        task,
        1 if success else -1,
        float(success),
        4 + k % 5,
        rm_outcome_prediction=0.9 if k % 2 else -0.3,
        value_estimates=np.linspace(0.1, 0.4 + k % 3 / 10, 4),
        score=(k % 7) / 7,
    )


def _drive(curriculum, start: int, stop: int) -> list:
    trace = []
    for k in range(start, stop):
        task = curriculum.next_task(k % 4)
        curriculum.update(_synthetic(task, k))
        trace.append((task.task_id, json.dumps(curriculum.metrics(), sort_keys=True)))
    return trace


@pytest.mark.parametrize("name", sorted(CURRICULA))
def test_state_dict_round_trip_resumes_identically(name: str) -> None:
    original = _make(name)
    _drive(original, 0, 150)
    snapshot = json.loads(json.dumps(original.state_dict()))
    resumed = _make(name)
    resumed.load_state_dict(snapshot)
    assert _drive(original, 150, 300) == _drive(resumed, 150, 300)


def test_task_pool_resumes_a_state_that_lists_its_issued_tasks() -> None:
    """States saved while ``issued`` was a list of tasks (one entry per rollout) resume exactly."""
    original = _make("task-pool-fresh")
    _drive(original, 0, 40)
    outstanding = [original.next_task(k % 3) for k in range(5)]  # issued, not yet back
    snapshot = json.loads(json.dumps(original.state_dict()))
    listed = 0
    for slot in snapshot["slots"]:
        fields = dict(slot["__dict__"])
        pairs = fields["issued"]["__dict__"]
        listed += sum(count for _, count in pairs)
        fields["issued"] = [task for task, count in pairs for _ in range(count)]
        slot["__dict__"] = list(fields.items())
    assert listed == len(outstanding)
    resumed = _make("task-pool-fresh")
    resumed.load_state_dict(snapshot)
    for k, task in enumerate(outstanding):
        original.update(_synthetic(task, 40 + k))
        resumed.update(_synthetic(task, 40 + k))
    assert resumed.stale == original.stale and resumed.metrics() == original.metrics()
    assert _drive(original, 50, 150) == _drive(resumed, 50, 150)


def test_state_of_another_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="state is for 'FixedCurriculum'"):
        UniformCurriculum(ENV).load_state_dict(FixedCurriculum(ENV, 0.1).state_dict())
