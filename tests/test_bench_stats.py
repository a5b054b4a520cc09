"""Paired comparisons of bench rows (agents.bench_stats) and their place in the report."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from agents.bench_report import markdown, summarize
from agents.bench_stats import (
    best_holm_p,
    compare,
    holm,
    paired,
    paired_interval,
    performance_profile,
    probability_of_improvement,
    sign_flip_p,
    smallest_p,
)


def test_sign_flip_p_is_exact_for_few_pairs_and_close_for_many() -> None:
    d = [0.3, -0.1, 0.2, 0.4]
    patterns = [np.dot(s, d) / 4 for s in itertools.product((1, -1), repeat=4)]
    expected = np.mean(np.abs(patterns) >= abs(np.mean(d)) - 1e-12)
    assert sign_flip_p(d) == pytest.approx(expected)
    assert sign_flip_p([0.0, 0.0]) == 1.0
    rng = np.random.default_rng(0)
    shifted = rng.normal(0.5, 1.0, 40)
    assert sign_flip_p(shifted) < 0.01  # 40 pairs, Monte Carlo: a real shift is found
    assert sign_flip_p(rng.normal(0.0, 1.0, 40)) > 0.05
    with pytest.raises(ValueError, match="differences must be"):
        sign_flip_p([0.1, float("nan")])


def test_holm_steps_down_and_keeps_order() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.2, 0.01]) == pytest.approx([0.2, 0.02])
    adjusted = holm([0.5, math.nan, 0.001])
    assert (
        adjusted[0] == pytest.approx(0.5) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.002)
    )


def test_pairs_improvement_and_interval() -> None:
    x = {("A", 0): 0.5, ("A", 1): 0.7, ("B", 0): 0.2, ("B", 1): math.nan, ("C", 0): 1.0}
    y = {("A", 0): 0.4, ("A", 1): 0.7, ("B", 0): 0.3, ("B", 1): 0.1}
    by_env = paired(x, y)
    assert by_env == {"A": [(0.5, 0.4), (0.7, 0.7)], "B": [(0.2, 0.3)]}  # NaN and unpaired dropped
    assert probability_of_improvement(by_env) == pytest.approx((0.75 + 0.0) / 2)
    point, low, high = paired_interval({"A": [(0.5, 0.4), (0.7, 0.7)], "B": [(0.2, 0.3), (0.4, 0.3)]})
    assert point == pytest.approx(0.025) and low <= point <= high  # differences 0.1, 0, -0.1, 0.1
    assert performance_profile([0.1, math.nan, 0.9], [0.0, 0.5]) == [1.0, 0.5]


def test_compare_resolves_a_real_gap_and_not_noise() -> None:
    rng = np.random.default_rng(1)
    base = {(env, s): float(rng.random()) for env in "AB" for s in range(10)}
    better = {k: v + 0.2 for k, v in base.items()}
    noisy = {k: v + float(rng.normal(0, 0.2)) for k, v in base.items()}
    rows = {"Outcome-only": base, "+ Env": better, "Policy": noisy}
    results = compare(rows, [("+ Env", "Outcome-only"), ("Policy", "Outcome-only"), ("+ Reward", "Policy")])
    assert [r["comparison"] for r in results] == ["+ Env vs Outcome-only", "Policy vs Outcome-only"]
    gap, noise = results
    assert gap["pairs"] == 20 and gap["difference"] == pytest.approx(0.2) and gap["resolved"]
    assert gap["p_improvement"] == 1.0 and gap["low"] == pytest.approx(0.2)
    assert not noise["resolved"] and noise["p_holm"] >= noise["p"]


def _run(env: str, mode: str, strategy: str, seed: int, start: float, final: float) -> dict:
    levels = ["0.0", "0.5", "1.0"]
    return {
        "spec": {"env": env, "mode": mode, "strategy": strategy, "seed": seed},
        "settings": {"max_difficulty": 0.5},
        "evaluations": [
            {"step": 0, "success": dict.fromkeys(levels, start)},
            {"step": 100, "success": {"0.0": final, "0.5": final / 2, "1.0": 0.0}},
        ],
        "metrics": {"success": {"d50": 0.1, "auc_difficulty": final / 2}},
        "history": [],
        "rm_before": None,
        "rm_after": None,
    }


def test_the_report_carries_the_declared_comparisons_and_profiles() -> None:
    runs = [_run(env, "outcome", "fixed", s, 0.1, 0.4 + 0.01 * s) for env in "AB" for s in range(6)]
    runs += [_run(env, "env", "task-pool", s, 0.1, 0.8 + 0.01 * s) for env in "AB" for s in range(6)]
    runs += [_run(env, "env", "plr", s, 0.1, 0.8 + 0.01 * s) for env in "AB" for s in range(6)]
    references = {
        env: {"random": {"0.0": 0.2, "0.5": 0.0, "1.0": 0.0}, "oracle": {"0.0": 1.0, "0.5": 1.0, "1.0": 1.0}}
        for env in "AB"
    }
    summary = summarize(runs, references)
    by_name = {r["comparison"]: r for r in summary["comparisons"]}
    assert set(by_name) == {"+ Env vs Outcome-only", "+ Env vs + Env (plr)"}
    assert by_name["+ Env vs Outcome-only"]["resolved"] and by_name["+ Env vs Outcome-only"]["pairs"] == 12
    assert (
        by_name["+ Env vs + Env (plr)"]["difference"] == 0 and not by_name["+ Env vs + Env (plr)"]["resolved"]
    )
    assert summary["profiles"]["+ Env"][0] == 1.0 and len(summary["profiles"]["Before training"]) == 11
    text = markdown(summary)
    assert "## Pre-declared comparisons (paired runs, Holm-corrected)" in text
    assert "| + Env vs Outcome-only | 12 |" in text
    assert "| A | Random policy | 0.10 | 0.00 | - | - | 0.00 | - |" in text
    # normalised areas: outcome-only runs (0.4 .. 0.45 at d = 0) below the task pool's (0.8 ..)
    ablation = summary["ablation"]
    assert ablation["Outcome-only"]["normalised"][0] < ablation["+ Env"]["normalised"][0]
    before_area = (0.1 - 0.2 * 0.25) / (1 - 0.2 * 0.25)  # 0.1 everywhere vs random's 0.2 at d = 0
    assert ablation["Before training"]["normalised"][0] == pytest.approx(before_area)
    assert summary["strategies"]["plr"]["normalised"][0] == pytest.approx(ablation["+ Env"]["normalised"][0])
    assert summarize(runs)["comparisons"] == []  # no references: no normalised score to compare


def test_write_report_reads_the_references_and_draws_the_profiles(tmp_path) -> None:
    import json

    from agents.bench_report import write_report

    runs = [_run("A", "outcome", "fixed", s, 0.1, 0.5) for s in range(3)]
    runs += [_run("A", "env", "task-pool", s, 0.1, 0.5) for s in range(3)]
    (tmp_path / "runs").mkdir()
    ids = []
    for run in runs:
        spec = run["spec"]
        ids.append(f"{spec['env']}__{spec['mode']}__{spec['strategy']}__s{spec['seed']}")
        (tmp_path / "runs" / f"{ids[-1]}.json").write_text(json.dumps(run))
    levels = {"0.0": 0.0, "0.5": 0.0, "1.0": 0.0}
    (tmp_path / "references.json").write_text(
        json.dumps({"A": {"random": levels, "oracle": dict.fromkeys(levels, 1.0)}})
    )
    summary = write_report(tmp_path, ids)
    assert [r["comparison"] for r in summary["comparisons"]] == ["+ Env vs Outcome-only"]
    assert "Pre-declared comparisons" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "profiles.png").stat().st_size > 0


def test_too_few_pairs_are_reported_as_unable_to_resolve() -> None:
    from agents.bench_stats import smallest_p

    assert smallest_p(5) == 0.0625 and smallest_p(20) == pytest.approx(1 / 20_001)
    assert sign_flip_p([1.0] * 20) == pytest.approx(1 / 20_001)  # Monte Carlo: never exactly 0
    five = {("A", s): 1.0 for s in range(5)}
    results = compare({"+ Env": five, "Outcome-only": dict.fromkeys(five, 0.0)}, [("+ Env", "Outcome-only")])
    (only,) = results
    assert only["p"] == 0.0625 and not only["resolved"] and not only["can_resolve"]
    nine = {("A", s): 1.0 for s in range(9)}
    (enough,) = compare({"X": nine, "Y": dict.fromkeys(nine, 0.0)}, [("X", "Y")])
    assert enough["resolved"] and enough["can_resolve"] and enough["p"] == pytest.approx(2 / 2**9)
    summary = {"ablation": {}, "strategies": {}, "per_env": {}, "comparisons": results, "score": "s"}
    assert "no: 5 pairs cannot reach p < 0.05 after Holm" in markdown(summary)


def test_a_nan_on_either_side_drops_the_pair() -> None:
    x = {("A", 0): 0.5, ("A", 1): 0.6, ("A", 2): math.nan}
    y = {("A", 0): math.nan, ("A", 1): 0.2, ("A", 2): 0.3}
    assert paired(x, y) == {"A": [(0.6, 0.2)]}


def test_the_exact_test_reaches_sixteen_pairs_and_monte_carlo_starts_beyond() -> None:
    assert sign_flip_p([1.0] * 16) == 2 / 2**16  # exact: 2 of 65536 patterns, not (k + 1) / 20001
    assert smallest_p(16) == 2 / 2**16 and smallest_p(17) == 1 / 20_001
    assert smallest_p(0) == 1.0


def test_holm_keeps_adjusted_p_monotone_and_at_most_one() -> None:
    assert holm([0.4, 0.6]) == pytest.approx([0.8, 0.8])  # 0.6 * 1 raised to 0.4 * 2
    assert holm([0.6, 0.7, 0.9]) == [1.0, 1.0, 1.0]  # 1.8, 1.4, 0.9 capped


def test_paired_interval_pools_pairs_and_needs_two_per_env() -> None:
    # A: differences 1, 1, 1; B: 0, 0. The point is the mean over the 5 pairs, not over the envs
    point, low, high = paired_interval({"A": [(1.0, 0.0)] * 3, "B": [(0.5, 0.5)] * 2})
    assert (point, low, high) == pytest.approx((0.6, 0.6, 0.6))  # every resample is that mean
    point, low, high = paired_interval({"A": [(1.0, 0.0)], "B": [(0.5, 0.0), (0.0, 0.0)]})
    assert point == pytest.approx(0.5) and math.isnan(low) and math.isnan(high)  # A has one pair


def test_paired_interval_is_the_central_95_percent() -> None:
    # differences 0, 1, 1: a resample's mean is 0 with probability 1/27 = 3.7 %, 1 with 8/27,
    # so the 2.5th percentile is 0 (a 5th would be 1/3) and the 97.5th is 1
    point, low, high = paired_interval({"A": [(0.0, 0.0), (1.0, 0.0), (1.0, 0.0)]})
    assert point == pytest.approx(2 / 3) and low == 0.0 and high == 1.0


def test_probability_of_improvement_is_the_mean_over_envs() -> None:
    by_env = {"A": [(1.0, 0.0)], "B": [(1.0, 0.0)], "C": [(0.0, 1.0), (0.0, 0.0)]}
    assert probability_of_improvement(by_env) == pytest.approx((1.0 + 1.0 + 0.25) / 3)
    assert math.isnan(probability_of_improvement({"A": []}))


def test_performance_profile_counts_scores_strictly_above_tau() -> None:
    assert performance_profile([0.0, 0.5, 1.0], [0.0, 0.5, 1.0]) == pytest.approx([2 / 3, 1 / 3, 0.0])


def test_holm_over_the_family_decides_resolution() -> None:
    # six all-positive pairs: p = 2 / 64 = 0.031 resolves alone, but Holm over two makes it 0.0625
    six = {("A", s): 1.0 for s in range(6)}
    zero = dict.fromkeys(six, 0.0)
    (alone,) = compare({"X": six, "Y": zero}, [("X", "Y")])
    assert alone["p"] == alone["p_holm"] == 2 / 64 and alone["resolved"] and alone["can_resolve"]
    rows = {"X": six, "Y": zero, "Z": dict.fromkeys(six, -1.0)}
    results = compare(rows, [("X", "Y"), ("Y", "Z")])
    for result in results:
        assert result["p"] == 2 / 64 and result["p_holm"] == 4 / 64
        assert not result["resolved"] and not result["can_resolve"]


def test_iqm_averages_the_middle_half() -> None:
    from agents.bench_records import iqm

    assert iqm([0.0, 0.0, 0.0, 1.0, 2.0, 10.0, 10.0, 10.0]) == pytest.approx((0 + 1 + 2 + 10) / 4)
    assert math.isnan(iqm([]))


def test_before_training_is_compared_at_the_first_evaluation() -> None:
    runs = [_run(env, "policy", "fixed", s, 0.0, 1.0) for env in "AB" for s in range(3)]
    levels = ("0.0", "0.5", "1.0")
    references = {
        env: {"random": dict.fromkeys(levels, 0.0), "oracle": dict.fromkeys(levels, 1.0)} for env in "AB"
    }
    (before,) = summarize(runs, references)["comparisons"]
    assert before["comparison"] == "Policy vs Before training" and before["pairs"] == 6
    assert before["difference"] > 0 and before["p_improvement"] == 1.0  # success 0 everywhere before


def test_a_resolved_comparison_could_resolve() -> None:
    """can_resolve counts Holm's family as Holm does: X vs Z has no pairs (p NaN), so the family
    is one comparison for both (it counted two, giving resolved and not can_resolve)."""
    six = {("A", s): 1.0 for s in range(6)}
    rows = {"X": six, "Y": dict.fromkeys(six, 0.0), "Z": {("B", 0): 0.5}}
    with_data, without = compare(rows, [("X", "Y"), ("X", "Z")])
    assert without["pairs"] == 0 and math.isnan(without["p_holm"])
    assert with_data["p_holm"] == 2 / 64 and with_data["resolved"]
    assert with_data["can_resolve"]


def test_a_comparison_with_fewer_pairs_than_the_family_s_could_resolve() -> None:
    """Holm multiplies only the smallest p by the family's size: 6 pairs (p >= 1/32) resolve in a
    family of two when the other comparison, with 9 pairs, ranks first. ``can_resolve`` says so
    (it took k * 2 / 2^n, false here), and the verdict does not call a resolvable one hopeless."""
    from agents.bench_report import _verdict

    before = {("E", s): 0.0 for s in range(6)}
    policy = {("E", s): 0.5 + 0.01 * s for s in range(9)}
    reward = {("E", s): 0.9 + 0.01 * s for s in range(9)}
    rows = {"Before training": before, "Policy": policy, "+ Reward": reward}
    declared = [("Policy", "Before training"), ("+ Reward", "Policy")]
    first, second = compare(rows, declared)
    assert first["pairs"] == 6 and first["p_holm"] == 2 / 64 and first["resolved"] and first["can_resolve"]
    assert second["pairs"] == 9 and second["can_resolve"]
    before[("E", 0)] = 0.6  # one pair the other way: p 4 / 64, unresolved but resolvable
    first = compare(rows, declared)[0]
    assert not first["resolved"] and first["can_resolve"] and _verdict(first) == "no"


def test_best_holm_p_is_the_least_holm_p_any_achievable_p_values_give() -> None:
    """Brute force over families of up to four: each comparison at its smallest p, at another's
    smallest p above it, or at 1 (where Holm's order can change), against :func:`best_holm_p`."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        mins = [smallest_p(int(n)) for n in rng.integers(3, 12, size=int(rng.integers(1, 5)))]
        choices = [sorted({m, 1.0, *(x for x in mins if x >= m)}) for m in mins]
        least = min(holm(list(values))[0] for values in itertools.product(*choices))
        assert best_holm_p(mins[0], mins[1:]) == pytest.approx(least)


def test_p_values_print_on_the_side_of_0_05_they_are() -> None:
    """3 decimals, more where rounding would cross 0.05 (an 11-pair exact p of 102 / 2048 =
    0.0498 resolves and must not print as 0.050); "-" where there is none."""
    from agents.bench_report import _p

    assert _p(102 / 2048) == "0.0498" and _p(0.05) == "0.050" and _p(0.0501) == "0.050"
    assert _p(0.031) == "0.031" and _p(math.nan) == "-" and float(_p(0.04999999)) < 0.05
