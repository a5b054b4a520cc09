"""rla_gym.stats: hand-computed cases and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rla_gym.stats import error_statistics, precision_bound, vote_statistics

predictions = st.lists(st.floats(-1, 1), min_size=1, max_size=50)


@given(data=st.data(), pred=predictions)
def test_error_statistics_properties(data, pred) -> None:
    actual = data.draw(st.lists(st.sampled_from([-1, 1]), min_size=len(pred), max_size=len(pred)))
    s = error_statistics(pred, actual)
    assert 0 <= s["p_over"] + s["p_under"] <= 1
    assert 0 <= s["balance"] <= 1
    mirrored = error_statistics([-p for p in pred], [-a for a in actual])  # flip every sign
    assert mirrored["p_over"] == s["p_under"] and mirrored["balance"] == s["balance"]
    assert math.isclose(s["mean_error"], float(np.mean(np.array(pred) - np.array(actual))), abs_tol=1e-12)


def test_error_statistics_hand_cases() -> None:
    s = error_statistics([1.0, 1.0, 0.0, -1.0], [1, -1, -1, 1])  # errors 0, 2, 1, -2
    assert (s["p_over"], s["p_under"], s["balance"]) == (0.5, 0.25, 0.5)
    assert error_statistics([1, -1], [1, -1])["balance"] == 1.0  # no error at all: defined as balanced
    assert error_statistics([0.9, 0.9], [-1, -1])["balance"] == 0.0


@pytest.mark.parametrize(
    ("pred", "actual", "match"),
    [
        ([0.5, float("nan")], [1, 1], "predicted must be finite, got nan"),
        ([1.5], [1], "in \\[-1, 1\\], got 1.5"),
        ([0.5], [0], "must be \\+1 or -1, got 0.0"),
        ([0.5, 0.1], [1], "differ in length"),
        ([], [], "at least one"),
    ],
)
def test_error_statistics_rejects_bad_input(pred, actual, match) -> None:
    with pytest.raises(ValueError, match=match):
        error_statistics(pred, actual)


@given(
    st.lists(
        st.tuples(st.lists(st.sampled_from([-1, 1]), min_size=3, max_size=3), st.sampled_from([-1, 1])),
        min_size=1,
    )
)
def test_vote_statistics_properties(rows) -> None:
    votes = [v for v, _ in rows]
    outcomes = [o for _, o in rows]
    s = vote_statistics(votes, outcomes)
    for key in ("p_plus", "p_minus"):
        assert math.isnan(s[key]) or 0 <= s[key] <= 1
    assert math.isnan(s["mu"]) or math.isclose(s["mu"], s["p_plus"] + s["p_minus"])


def test_vote_statistics_hand_case_and_errors() -> None:
    s = vote_statistics([[1, 1, -1], [1, -1, -1], [-1, -1, -1]], [1, 1, -1])
    assert s == {"p_plus": 0.5, "p_minus": 1.0, "mu": 1.5}
    assert math.isnan(vote_statistics([[1, 1]], [1])["p_minus"])
    with pytest.raises(ValueError, match="votes must be \\+1 or -1, got 0.0"):
        vote_statistics([[1, 0]], [1])
    with pytest.raises(ValueError, match="3 steps but outcomes has 2"):
        vote_statistics([[1], [1], [1]], [1, 1])


def test_vote_statistics_reads_1d_votes_as_one_vote_per_step() -> None:
    assert vote_statistics([1, -1], [1, -1]) == {"p_plus": 1.0, "p_minus": 1.0, "mu": 2.0}
    assert vote_statistics([1, 1, -1], [1, -1, -1]) == vote_statistics([[1], [1], [-1]], [1, -1, -1])


@given(mu=st.floats(1.0, 2.0), m=st.integers(1, 100))
def test_precision_bound_grows_with_m_and_mu(mu, m) -> None:
    bound = precision_bound(mu, m)
    assert 0 <= bound < 1
    assert precision_bound(mu, m + 1) >= bound
    assert precision_bound(min(mu + 0.1, 2.0), m) >= bound


def test_precision_bound_hand_cases() -> None:
    assert precision_bound(1.0, 10) == 0.0 and precision_bound(0.4, 10) == 0.0
    assert math.isclose(precision_bound(2.0, 4), 1 - math.exp(-1))
    for mu, m in [(float("nan"), 3), (2.5, 3), (1.5, 0), (1.5, 2.0), (1.5, True)]:
        with pytest.raises(ValueError, match="must be"):
            precision_bound(mu, m)
