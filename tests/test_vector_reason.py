"""RLA-Reason's array-state vector env runs exactly what the lean loop (and so single envs) runs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import rla_gym
import rla_gym.vector
from rla_gym.core import Task
from rla_gym.envs.reason import FAMILIES, ROWS, WRITE_, ReasonEnv
from rla_gym.envs.reason.tasks import BUFFER, TOK
from rla_gym.envs.reason.vector import ReasonVectorEnv
from rla_gym.vector import RLAVectorEnv

ENV_ID = "RLA-Reason-v0"
ACTIONS = len(ReasonEnv.action_names)
N = 22  # difficulties 0, 0.05, ..., 1: every family, operator set, digit count and budget


@pytest.fixture
def array_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``gym.make_vec`` pick :class:`ReasonVectorEnv` for ``array_state=True``."""
    key = "rla_gym.envs.reason.env:ReasonEnv"
    monkeypatch.setitem(rla_gym.vector.ARRAY_VECTOR_ENVS, key, "rla_gym.envs.reason.vector:ReasonVectorEnv")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) and a.dtype == object:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return (
        type(a) is type(b)
        and bool(np.array_equal(a, b))
        and getattr(a, "dtype", None) == getattr(b, "dtype", None)
    )


def _same_info(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Every key, its flags and every flagged value equal (final_* are compared by the caller)."""
    assert ours.keys() == theirs.keys()
    for key in (k for k in theirs if not k.startswith("_") and not k.startswith("final")):
        assert np.array_equal(ours["_" + key], theirs["_" + key]), key
        assert ours[key].dtype == theirs[key].dtype, key
        for i in np.flatnonzero(theirs["_" + key]):
            assert _same(ours[key][i], theirs[key][i]), (key, i, ours[key][i], theirs[key][i])


def _actions(oracles: np.ndarray, masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Mostly the oracle's commands (so hard tasks finish too), some admissible, some any."""
    actions = []
    for oracle, admissible in zip(oracles, masks, strict=True):
        u = rng.random()
        if u < 0.75 and oracle.any():
            actions.append(rng.choice(np.flatnonzero(oracle)))
        elif u < 0.95:
            actions.append(rng.choice(np.flatnonzero(admissible)))
        else:  # often inadmissible: a flagged no-op
            actions.append(rng.integers(len(admissible)))
    return np.array(actions, dtype=np.int64)


def _reset_both(ours: RLAVectorEnv, theirs: RLAVectorEnv, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """Reset both envs alike and assert the same outcome; the lean loop's obs and info."""
    obs_a, info_a = ours.reset(**kwargs)
    obs_b, info_b = theirs.reset(**kwargs)
    assert _same(obs_a, obs_b)
    _same_info(info_a, info_b)
    return obs_b, info_b


def _pair(autoreset: AutoresetMode, obs_mode: str = "dict") -> tuple[RLAVectorEnv, RLAVectorEnv]:
    kwargs = {"difficulty": 0.5, "autoreset_mode": autoreset, "obs_mode": obs_mode}
    ours = gym.make_vec(ENV_ID, num_envs=N, array_state=True, **kwargs)
    theirs = gym.make_vec(ENV_ID, num_envs=N, array_state=False, **kwargs)
    assert isinstance(ours, ReasonVectorEnv) and type(theirs) is RLAVectorEnv
    return ours, theirs


@pytest.mark.usefixtures("array_state")
@pytest.mark.parametrize(
    ("autoreset", "obs_mode"),
    [
        (AutoresetMode.NEXT_STEP, "dict"),
        (AutoresetMode.SAME_STEP, "dict"),
        (AutoresetMode.NEXT_STEP, "flat"),
        (AutoresetMode.DISABLED, "dict"),
    ],
)
def test_reason_array_state_env_matches_the_lean_loop_at_every_difficulty(
    autoreset: AutoresetMode, obs_mode: str
) -> None:
    ours, theirs = _pair(autoreset, obs_mode)
    levels = np.round(np.linspace(0.0, 1.0, N), 3)
    ours.set_difficulties(levels)
    theirs.set_difficulties(levels)
    obs_b, info_b = _reset_both(ours, theirs, seed=11)
    rng = np.random.default_rng(0)
    outcomes: list[int] = []
    invalid = rejected = 0
    finished = np.zeros(N, dtype=bool)
    for t in range(600):
        if autoreset == AutoresetMode.DISABLED and t % 5 == 4 and finished.any():  # restart them by hand
            obs_b, info_b = _reset_both(ours, theirs, options={"reset_mask": finished.copy()})
            finished[:] = False
        masks = obs_b["action_mask"] if obs_mode == "dict" else obs_b[:, -ACTIONS:].astype(np.int8)
        actions = _actions(info_b["oracle_mask"], masks, rng)
        obs_a, r_a, term_a, trunc_a, info_a = ours.step(actions)
        obs_b, r_b, term_b, trunc_b, info_b = theirs.step(actions)
        assert _same(obs_a, obs_b) and _same(r_a, r_b)
        assert _same(term_a, term_b) and _same(trunc_a, trunc_b)
        _same_info(info_a, info_b)
        if autoreset == AutoresetMode.DISABLED:  # finished sub-envs stay finished, unreported
            assert not (finished & (term_b | trunc_b)).any() and not info_b["_distance"][finished].any()
            finished |= term_b | trunc_b
        for i in np.flatnonzero(term_b | trunc_b):
            if autoreset == AutoresetMode.SAME_STEP:
                assert _same(info_a["final_obs"][i], info_b["final_obs"][i])
                final_a, final_b = info_a["final_info"], info_b["final_info"]
                assert final_a.keys() == final_b.keys()
                for key in (k for k in final_b if not k.startswith("_")):
                    assert _same(final_a[key][i], final_b[key][i]), key
            last = info_b["final_info"] if autoreset == AutoresetMode.SAME_STEP else info_b
            outcomes.append(int(last["outcome"][i]))
        invalid += int(info_b["invalid_action"].sum())
        tokens = obs_b["tokens"] if obs_mode == "dict" else obs_b[:, : ReasonEnv.token_length]
        rejected += int((tokens[:, -1] == TOK["rejected"]).sum())
    assert outcomes.count(1) >= 200 and outcomes.count(-1) >= 10  # successes and budget cuts
    assert invalid >= 100 and rejected >= 50  # no-ops and wrong writes were exercised


@pytest.mark.usefixtures("array_state")
def test_partial_resets_seeds_options_and_per_env_tasks_match_the_lean_loop() -> None:
    ours, theirs = _pair(AutoresetMode.NEXT_STEP)
    tasks = [Task(ENV_ID, d, 500 + k) for k, d in enumerate(np.linspace(0, 1, N))]
    rng = np.random.default_rng(3)
    oracle = np.zeros((N, len(ReasonEnv.action_names)), dtype=np.int8)

    def compare(obs_a: Any, info_a: dict[str, Any], obs_b: Any, info_b: dict[str, Any]) -> np.ndarray:
        """Compare, and return the admissible masks of every sub-env."""
        assert _same(obs_a, obs_b)
        _same_info(info_a, info_b)
        reported = info_b["_oracle_mask"]
        oracle[reported] = info_b["oracle_mask"][reported]  # the others keep their last oracle
        return obs_b["action_mask"]

    def both(call: Any) -> np.ndarray:
        """Run ``call`` (a reset) on both envs and compare."""
        return compare(*call(ours), *call(theirs))

    masks = both(lambda env: env.reset(seed=list(range(40, 40 + N))))
    masks = both(lambda env: env.reset(seed=5, options={"difficulty": 0.8}))
    for round_ in range(6):
        if round_ == 1:
            ours.set_tasks(tasks[:5] + [None] * (N - 5))
            theirs.set_tasks(tasks[:5] + [None] * (N - 5))
        if round_ == 2:
            ours.set_attr("pinned_task", tasks)
            theirs.set_attr("pinned_task", tasks)
        if round_ == 3:
            ours.set_difficulties(np.linspace(1, 0, N))
            theirs.set_difficulties(np.linspace(1, 0, N))
        if round_ == 4:
            task = Task(ENV_ID, 0.95, 77)
            picked = np.arange(N) % 3 == 0
            masks = both(lambda env, m=picked, t=task: env.reset(options={"reset_mask": m, "task": t}))
        picked = rng.random(N) < 0.5
        masks = both(lambda env, m=picked, s=round_: env.reset(seed=s, options={"reset_mask": m}))
        for _ in range(30):
            actions = _actions(oracle, masks, rng)
            step_a, step_b = ours.step(actions), theirs.step(actions)
            for x, y in zip(step_a[:4], step_b[:4], strict=True):
                assert _same(x, y)
            masks = compare(step_a[0], step_a[4], step_b[0], step_b[4])
    assert ours.get_attr("task") == theirs.get_attr("task")
    assert ours.get_attr("pinned_task") == theirs.get_attr("pinned_task")
    assert ours.get_attr("pinned_task")[0] == Task(ENV_ID, 0.95, 77)


def _code(text: str) -> int:
    """The prefix code of ``text``, written out independently of the env's table."""
    return sum(("0123456789-".index(c) + 1) * 12**i for i, c in enumerate(text))


def test_worksheets_read_into_arrays_are_the_single_envs() -> None:
    """Codes, oracle commands, dependencies and budgets of 2,200 generated worksheets."""
    envs = ReasonVectorEnv(N * 10, difficulty=0.5)
    envs.set_difficulties(np.repeat(np.round(np.linspace(0.0, 1.0, N), 3), 10))
    families = set()
    for seed in range(10):
        _, info = envs.reset(seed=1000 * seed)
        for i, env in enumerate(envs.envs):
            families.add(env._family)
            rows = env._rows
            for r, text in enumerate(env._strings):
                codes = [_code(text[:j]) if j <= len(text) else -1 for j in range(BUFFER + 1)]
                assert envs._codes[i, :, r].tolist() == codes and envs._full[i, r] == _code(text)
                commands = ["0123456789-".index(c) for c in text] + [WRITE_ + r]
                flat = [i * ACTIONS + c for c in commands] + [N * 10 * ACTIONS] * (BUFFER + 1 - len(commands))
                assert envs._target[i, :, r].tolist() == flat  # indices into the flat oracle array
            assert (envs._codes[i, :, len(rows) :] == -1).all()
            assert envs._deps[i, : len(rows)].tolist() == [sum(1 << d for d in row.deps) for row in rows]
            assert not envs._valid[i, len(rows) :].any() and envs._valid[i, : len(rows)].all()
            assert envs._ready[i].tolist() == [r in env._ready for r in range(ROWS)]
            assert envs._maxlen[i] == env._maxlen and envs._left[i] == env._left
            assert info["step_budget"][i] == env._step_budget(env._left)
    assert families == set(FAMILIES)


def test_construction_modes_and_bad_input(array_state: None) -> None:
    flat = gym.make_vec(ENV_ID, 3, obs_mode="flat", difficulty=0.7, array_state=True)
    assert isinstance(flat, ReasonVectorEnv)
    obs, info = flat.reset(seed=2)
    assert obs.shape == (3, ReasonEnv.token_length + 23) and obs.dtype == np.float32
    assert np.array_equal(obs[:, -23:], info["action_mask"])
    assert type(gym.make_vec(ENV_ID, 3, obs_mode="text", array_state=True)) is RLAVectorEnv
    with pytest.raises(ValueError, match="'text' uses RLAVectorEnv"):
        ReasonVectorEnv(2, obs_mode="text")
    envs = ReasonVectorEnv(2, oracle_info=False)
    _, info = envs.reset(seed=0)
    assert "oracle_mask" not in info and info["_distance"].all()
    _, _, _, _, info = envs.step(np.array([ReasonEnv.noop_action] * 2))
    assert "oracle_mask" not in info and not info["invalid_action"].any()
    with pytest.raises(ValueError, match=r"actions must lie in \[0, "):
        envs.step(np.array([0, 99]))
    assert np.array_equal(np.stack(envs.call("action_masks")), envs.action_masks())


def test_without_the_oracle_info_the_steps_are_the_lean_loops() -> None:
    kwargs = {"difficulty": 0.5, "oracle_info": False}
    ours = ReasonVectorEnv(N, **kwargs)
    theirs = gym.make_vec(ENV_ID, num_envs=N, array_state=False, **kwargs)
    levels = np.round(np.linspace(0.0, 1.0, N), 3)
    ours.set_difficulties(levels)
    theirs.set_difficulties(levels)
    (obs_a, info_a), (obs_b, info_b) = ours.reset(seed=3), theirs.reset(seed=3)
    rng = np.random.default_rng(4)
    none = np.zeros((N, ACTIONS), dtype=np.int8)
    for _ in range(150):
        assert _same(obs_a, obs_b) and "oracle_mask" not in info_a
        _same_info(info_a, info_b)
        actions = _actions(none, obs_b["action_mask"], rng)
        obs_a, *_, info_a = ours.step(actions)
        obs_b, *_, info_b = theirs.step(actions)
