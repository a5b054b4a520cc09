"""RLA-GUI's array-state vector env runs exactly what the lean loop (and so single envs) runs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import rla_gym
import rla_gym.vector
from rla_gym.core import Task
from rla_gym.envs.gui import GUIEnv
from rla_gym.envs.gui.layout import NODE_OPENER, OK_, TOKEN_LENGTH, WAIT_
from rla_gym.envs.gui.vector import GUIVectorEnv
from rla_gym.vector import RLAVectorEnv

ENV_ID = "RLA-GUI-v0"
N = 22  # difficulties 0, 0.05, ..., 1: open dialog / menus / nothing, instant apply, scrolling, 1-3 goals
ACTIONS = len(GUIEnv.action_names)


@pytest.fixture
def array_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``gym.make_vec`` pick :class:`GUIVectorEnv` for ``array_state=True``."""
    key = "rla_gym.envs.gui.env:GUIEnv"
    monkeypatch.setitem(rla_gym.vector.ARRAY_VECTOR_ENVS, key, "rla_gym.envs.gui.vector:GUIVectorEnv")


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
        if u < 0.7 and oracle.any():
            actions.append(rng.choice(np.flatnonzero(oracle)))
        elif u < 0.93:
            actions.append(rng.choice(np.flatnonzero(admissible)))
        else:  # often inadmissible: a flagged no-op
            actions.append(rng.integers(len(admissible)))
    return np.array(actions, dtype=np.int64)


def _pair(autoreset: AutoresetMode, obs_mode: str = "dict", n: int = N) -> tuple[RLAVectorEnv, RLAVectorEnv]:
    kwargs = {"difficulty": 0.5, "autoreset_mode": autoreset, "obs_mode": obs_mode}
    ours = gym.make_vec(ENV_ID, num_envs=n, array_state=True, **kwargs)
    theirs = gym.make_vec(ENV_ID, num_envs=n, array_state=False, **kwargs)
    assert isinstance(ours, GUIVectorEnv) and type(theirs) is RLAVectorEnv
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
def test_gui_array_state_env_matches_the_lean_loop_at_every_difficulty(
    autoreset: AutoresetMode, obs_mode: str
) -> None:
    ours, theirs = _pair(autoreset, obs_mode)
    levels = np.round(np.linspace(0.0, 1.0, N), 3)
    ours.set_difficulties(levels)
    theirs.set_difficulties(levels)
    obs_a, info_a = ours.reset(seed=11)
    obs_b, info_b = theirs.reset(seed=11)
    assert _same(obs_a, obs_b)
    _same_info(info_a, info_b)
    rng = np.random.default_rng(0)
    outcomes: list[int] = []
    finished = np.zeros(N, dtype=bool)
    invalid = dialogs = 0
    for t in range(400):
        if autoreset == AutoresetMode.DISABLED and t % 5 == 4 and finished.any():
            options = {"reset_mask": finished.copy()}  # restart the finished ones by hand
            obs_a, info_a = ours.reset(options=options)
            obs_b, info_b = theirs.reset(options=options)
            assert _same(obs_a, obs_b)
            _same_info(info_a, info_b)
            finished[:] = False
        masks = obs_b["action_mask"] if obs_mode == "dict" else obs_b[:, TOKEN_LENGTH:].astype(np.int8)
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
        dialogs += int(info_b["action_mask"][:, OK_].sum())  # OK is admissible in every dialog
    assert outcomes.count(1) >= 150 and outcomes.count(-1) >= 10  # successes and budget cuts
    assert invalid >= 100 and dialogs >= 1000  # no-ops and dialog steps were exercised


@pytest.mark.usefixtures("array_state")
def test_partial_resets_seeds_options_and_per_env_tasks_match_the_lean_loop() -> None:
    ours, theirs = _pair(AutoresetMode.NEXT_STEP)
    tasks = [Task(ENV_ID, d, 500 + k) for k, d in enumerate(np.linspace(0, 1, N))]
    rng = np.random.default_rng(3)
    oracle = np.zeros((N, ACTIONS), dtype=np.int8)

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


def test_applications_read_into_arrays_are_the_single_envs() -> None:
    """Menus, dialogs, controls, goals and the oracle's tables of 440 generated applications."""
    envs = GUIVectorEnv(N * 10, difficulty=0.5)
    envs.set_difficulties(np.repeat(np.round(np.linspace(0.0, 1.0, N), 3), 10))
    for seed in range(2):
        _, info = envs.reset(seed=1000 * seed)
        for i, env in enumerate(envs.envs):
            nodes = len(env._n_kind)
            assert envs._kind[i, :nodes].tolist() == env._n_kind
            assert envs._opens[i, :nodes].tolist() == env._n_dialog
            for node, children in enumerate(env._n_children):
                assert envs._children[i, node, : len(children)].tolist() == children
                assert [envs._slot[i, c] for c in children] == list(range(len(children)))
            assert envs._top[i, : len(env._top)].tolist() == env._top
            for dialog in range(env._knobs.goal_dialogs):
                path = env._d_path[dialog]
                assert envs._d_path[i, dialog, : len(path)].tolist() == list(path)
                assert envs._d_len[i, dialog] == len(path)
                opener = envs._d_opener[i, dialog]
                assert env._n_kind[opener] == NODE_OPENER and env._n_dialog[opener] == dialog
                assert opener in env._n_children[path[-1]]
            controls = len(env._c_kind)
            assert envs._c_kind[i, :controls].tolist() == env._c_kind
            assert envs._committed[i, :controls].tolist() == env._committed
            assert envs._control_slot[i, :controls, 1:].tolist() == [list(c) for c in env._c_label]
            assert [envs._goal_of[i, c] for c in env._g_control] == list(range(len(env._g_control)))
            assert (envs._goal_of[i, :controls] >= 0).sum() == len(env._g_control)
            assert envs._g_page[i, : len(env._g_control)].tolist() == [env._c_page[c] for c in env._g_control]
            assert envs._d_mask[i, : env._knobs.dialogs].tolist() == env._d_mask
            for cw in range(1 << len(env._g_control)):
                assert envs._rest[i, cw] == env._rest(cw)
            distance = env._distance()  # the bare env still holds the first state
            assert info["distance"][i] == distance and info["step_budget"][i] == env._step_budget(distance)


def test_oracle_commands_reach_success_within_the_optimal_length() -> None:
    """Following only the oracle's commands, every task ends in exactly ``optimal_len`` steps."""
    envs = GUIVectorEnv(N * 3, difficulty=0.5, autoreset_mode=AutoresetMode.SAME_STEP)
    envs.set_difficulties(np.repeat(np.round(np.linspace(0.0, 1.0, N), 3), 3))
    _, info = envs.reset(seed=9)
    optimal, steps = info["optimal_len"].copy(), np.zeros(N * 3, dtype=np.int64)
    rng = np.random.default_rng(1)
    ended = 0
    for _ in range(200):
        oracle = info["oracle_mask"]
        assert oracle.any(axis=1).all() and not oracle[:, WAIT_].any()
        assert not (oracle & ~info["action_mask"].astype(bool)).any()
        _, reward, term, trunc, info = envs.step((rng.random(oracle.shape) * oracle).argmax(axis=1))
        steps += 1
        assert np.array_equal(term, reward == 1.0) and not trunc.any()
        for i in np.flatnonzero(term):
            assert steps[i] == optimal[i]
            ended += 1
        optimal[term], steps[term] = info["optimal_len"][term], 0
    assert ended >= 500


def test_construction_modes_and_bad_input(array_state: None) -> None:
    flat = gym.make_vec(ENV_ID, 3, obs_mode="flat", difficulty=0.7, array_state=True)
    assert isinstance(flat, GUIVectorEnv)
    obs, info = flat.reset(seed=2)
    assert obs.shape == (3, TOKEN_LENGTH + ACTIONS) and obs.dtype == np.float32
    assert np.array_equal(obs[:, TOKEN_LENGTH:], info["action_mask"])
    assert type(gym.make_vec(ENV_ID, 3, obs_mode="text", array_state=True)) is RLAVectorEnv
    assert type(gym.make_vec(ENV_ID, 3, array_state=False)) is RLAVectorEnv
    with pytest.raises(ValueError, match="'text' uses RLAVectorEnv"):
        GUIVectorEnv(2, obs_mode="text")
    envs = GUIVectorEnv(2, oracle_info=False)
    with pytest.raises(RuntimeError, match="before reset"):
        envs.step(np.zeros(2, dtype=np.int64))
    _, info = envs.reset(seed=0)
    assert "oracle_mask" not in info and info["_distance"].all()
    _, _, _, _, info = envs.step(np.array([WAIT_] * 2))
    assert "oracle_mask" not in info and not info["invalid_action"].any()
    with pytest.raises(ValueError, match=r"actions must lie in \[0, "):
        envs.step(np.array([0, 99]))
    assert np.array_equal(np.stack(envs.call("action_masks")), envs.action_masks())


@pytest.mark.usefixtures("array_state")
def test_sub_envs_pinned_to_one_task_generate_it_once_and_copy_it() -> None:
    tasks = [Task(ENV_ID, d, s) for d, s in ((0.1, 5), (0.8, 9), (0.5, 2))]
    pinned = [tasks[0], tasks[1], tasks[0], None, tasks[1], tasks[2], tasks[0], tasks[2]]
    ours, theirs = _pair(AutoresetMode.SAME_STEP, n=len(pinned))
    calls = []
    for env in ours.envs:
        generate = env._generate
        env._generate = lambda task, generate=generate: (calls.append(task), generate(task))[1]  # type: ignore[method-assign]
    ours.set_tasks(pinned)
    theirs.set_tasks(pinned)
    obs_a, info_a = ours.reset(seed=4)
    obs_b, info_b = theirs.reset(seed=4)
    assert len(calls) == 4  # three shared tasks and one sampled one
    assert _same(obs_a, obs_b)
    _same_info(info_a, info_b)
    rng = np.random.default_rng(2)
    for _ in range(200):
        actions = _actions(info_b["oracle_mask"], obs_b["action_mask"], rng)
        obs_a, r_a, term_a, trunc_a, info_a = ours.step(actions)
        obs_b, r_b, term_b, trunc_b, info_b = theirs.step(actions)
        assert _same(obs_a, obs_b) and _same(r_a, r_b) and _same(term_a, term_b) and _same(trunc_a, trunc_b)
        _same_info(info_a, info_b)
        for i in np.flatnonzero(term_b | trunc_b):
            assert _same(info_a["final_obs"][i], info_b["final_obs"][i])
    assert ours.get_attr("task") == theirs.get_attr("task")
