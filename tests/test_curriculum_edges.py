"""The curriculum adapters and strategies at their edges: outer time limits, partial resets and
DISABLED autoreset, resets that cut episodes short, seeding, a Ray-served curriculum's groups
and verdicts, bad values, bad saved states. Each case came from a review that found it failing."""

from __future__ import annotations

import json
import types

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

import rla_gym  # noqa: F401
import rla_gym.curricula.remote as remote
from agents.curriculum import CurriculumVecEnv
from rla_gym.curricula import (
    CurriculumServer,
    EpisodeResult,
    FixedCurriculum,
    FreshTaskPoolCurriculum,
    LearnabilityCurriculum,
    PrioritizedLevelReplay,
    RemoteCurriculum,
    RewardModelBalanceCurriculum,
    SuccessBandCurriculum,
    TaskPoolCurriculum,
    UniformCurriculum,
)
from rla_gym.wrappers import AdaptiveDifficultyWrapper, CurriculumVectorWrapper, CurriculumWrapper

E = "RLA-TextNav-v0"


class _Recorder(UniformCurriculum):
    """A uniform curriculum that records what it hands out, learns and gets back."""

    def __init__(self, **kwargs) -> None:
        super().__init__(E, **kwargs)
        self.handed: list[int] = []
        self.learned: list[tuple[int, int]] = []
        self.abandoned: list[int] = []

    def next_task(self, slot: int = 0):
        task = super().next_task(slot)
        self.handed.append(task.key)
        return task

    def _learn(self, result: EpisodeResult) -> None:
        self.learned.append((result.task.key, result.outcome))

    def abandon(self, task) -> None:
        self.abandoned.append(task.key)


def _random_actions(info: dict, rng: np.random.Generator) -> np.ndarray:
    return (rng.random(info["action_mask"].shape) * info["action_mask"]).argmax(axis=1)


def test_an_outer_time_limit_reports_a_failure() -> None:
    """``gym.make(id, max_episode_steps=N)`` cuts episodes before their budget: the env says
    outcome 0 there, and every adapter reports the cut episode as a failure (it raised)."""
    curriculum = _Recorder()
    env = CurriculumWrapper(gym.make(E, max_episode_steps=2, difficulty=1.0), curriculum)
    env.reset(seed=0)
    noop = env.unwrapped.noop_action
    assert not any(env.step(noop)[2:4]) and env.step(noop)[3]  # truncated by the outer limit
    assert curriculum.learned == [(curriculum.handed[0], -1)]
    vector = _Recorder()
    limited = gym.make_vec(E, num_envs=2, vectorization_mode="sync", max_episode_steps=2)
    envs = CurriculumVectorWrapper(limited, vector)
    envs.reset(seed=0)
    for _ in range(2):
        envs.step(np.full(2, noop))
    assert [outcome for _, outcome in vector.learned] == [-1, -1]


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_partial_resets_keep_the_other_sub_envs_and_attribute_exactly(mode: AutoresetMode) -> None:
    """Under every autoreset mode, random play with partial resets (under DISABLED, of the
    finished sub-envs, as Gymnasium asks): every handed-out task is either learned once, with
    the outcome its episode had, abandoned once (cut by a reset), or still running/queued."""
    curriculum = _Recorder()
    envs = CurriculumVectorWrapper(
        gym.make_vec(E, num_envs=4, difficulty=0.2, autoreset_mode=mode), curriculum
    )
    assert envs.autoreset_mode == mode
    _, info = envs.reset(seed=0)
    rng = np.random.default_rng(0)
    outcomes: list[int] = []
    waiting = np.zeros(4, dtype=bool)
    for step in range(400):
        _, _, terminated, truncated, info = envs.step(_random_actions(info, rng))
        final = info.get("final_info", info) if mode == AutoresetMode.SAME_STEP else info
        if mode != AutoresetMode.NEXT_STEP:
            outcomes += final["outcome"][terminated | truncated].tolist()
        waiting |= terminated | truncated
        if mode == AutoresetMode.DISABLED and waiting.any():
            _, info = envs.reset(options={"reset_mask": waiting.copy()})
            waiting[:] = False
        elif step % 37 == 36:  # cut sub-envs 1 and 2 short
            mask = np.array([False, True, True, False])
            _, info = envs.reset(options={"reset_mask": mask})
            waiting[mask] = False
    assert len(curriculum.learned) > 20 and len(curriculum.abandoned) > 0
    if mode != AutoresetMode.NEXT_STEP:
        assert [o for _, o in curriculum.learned] == outcomes
    envs.reset()  # now every episode handed out was learned, abandoned, or is running or queued
    learned = [key for key, _ in curriculum.learned]
    in_flight = [t.key for t in envs.running] + [t.key for t in envs.queued]
    assert sorted(learned + curriculum.abandoned + in_flight) == sorted(curriculum.handed)


def test_a_partial_reset_before_the_first_full_one_is_refused() -> None:
    envs = CurriculumVectorWrapper(gym.make_vec(E, num_envs=2), UniformCurriculum(E))
    with pytest.raises(ValueError, match="first reset .* takes no reset_mask"):
        envs.reset(options={"reset_mask": np.array([True, False])})
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="reset_mask'\\] must be a bool array of shape \\(2,\\)"):
        envs.reset(options={"reset_mask": np.array([1, 0])})


def test_learnability_refreshes_after_resets_cut_its_candidates_short() -> None:
    """A reset hands the cut candidate rollouts back (``abandon``), so the candidates are judged
    and the buffer refreshed (it waited forever for rollouts that never came)."""
    curriculum = LearnabilityCurriculum(E, candidates=4, rollouts=2, buffer_size=2, interval=8)
    envs = CurriculumVectorWrapper(gym.make_vec(E, num_envs=2, difficulty=0.0), curriculum)
    envs.reset(seed=0)
    _, info = envs.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(3000):
        *_, info = envs.step(_random_actions(info, rng))
    assert curriculum.episodes > 100 and curriculum.refreshes >= 1


def test_the_sb3_adapter_reuses_its_queued_tasks_and_hands_cut_ones_back() -> None:
    """A second reset starts the tasks already set for the next episodes and abandons the
    running ones; it works over SB3's VecEnv wrappers (VecMonitor keeps no reset infos)."""
    curriculum = _Recorder()
    venv = CurriculumVecEnv(VecMonitor(DummyVecEnv([lambda: gym.make(E)] * 2)), curriculum)
    venv.reset()
    running, queued = [t.key for t in venv.running], [t.key for t in venv.queued]
    venv.reset()
    assert [t.key for t in venv.running] == queued and curriculum.abandoned == running
    assert len(curriculum.handed) == 6  # 2 running, 2 queued, 2 queued anew: none thrown away


def test_the_sb3_adapter_refuses_task_options() -> None:
    venv = CurriculumVecEnv(DummyVecEnv([lambda: gym.make(E)] * 2), FixedCurriculum(E, 0.2))
    with pytest.raises(ValueError, match="conflict with the curriculum"):
        venv.set_options({"difficulty": 0.9})
    with pytest.raises(ValueError, match="conflict with the curriculum"):
        venv.set_options([{}, {"task": None}])
    venv.set_options({})
    venv.reset()


def test_reset_seed_seeds_the_single_env_curriculum() -> None:
    """``reset(seed=s)`` repeats the task (Gymnasium's determinism check), and sub-envs seeded
    apart draw apart (per-env curricula all had seed 0)."""
    env = CurriculumWrapper(gym.make(E), UniformCurriculum(E))
    first = env.reset(seed=123)[1]["task_key"]
    assert env.reset(seed=123)[1]["task_key"] == first != env.reset(seed=124)[1]["task_key"]
    envs = gym.vector.SyncVectorEnv([lambda: CurriculumWrapper(gym.make(E), UniformCurriculum(E))] * 3)
    assert len(set(envs.reset(seed=0)[1]["task_key"].tolist())) == 3


def test_the_single_env_wrapper_says_whether_to_train_and_hands_cut_episodes_back() -> None:
    plr = PrioritizedLevelReplay(E, score="external")
    env = CurriculumWrapper(gym.make(E), plr)
    env.reset(seed=0)
    assert env.training is False  # robust PLR's new level: only scored
    curriculum = _Recorder()
    env = CurriculumWrapper(gym.make(E), curriculum)
    env.reset(seed=0)
    env.reset()  # cuts the first episode short
    assert env.training is True and curriculum.abandoned == curriculum.handed[:1]


class _Handle:
    """A Ray actor handle's shape in-process: ``handle.method.remote(...)`` calls the method."""

    def __init__(self, target) -> None:
        self.target = target

    def __getattr__(self, name: str):
        return types.SimpleNamespace(remote=getattr(self.target, name))


def test_a_served_curriculum_hands_out_groups_verdicts_and_needs_values(monkeypatch) -> None:
    monkeypatch.setattr(remote, "_ray", lambda: types.SimpleNamespace(get=lambda value: value))
    served = FreshTaskPoolCurriculum(E, pool_size=1, rollouts_per_task=4)
    proxy = RemoteCurriculum(_Handle(CurriculumServer(served)))
    for _ in range(2):  # a round at d = 0 all won, then the harder proposal it makes
        group = proxy.next_group(0, 4)
        assert len({t.key for t in group}) == 1 and len(group) == 4
        for task in group:
            proxy.update(EpisodeResult(task, 1, 1.0, 3))
    assert served.stale == 0 and served.accepted + served.rejected == 1  # one group a round; judged
    assert proxy.verdict(group[0]) is (served.accepted == 1)
    assert RemoteCurriculum(_Handle(CurriculumServer(PrioritizedLevelReplay(E)))).needs_values


def test_plr_refuses_value_estimates_that_are_not_finite() -> None:
    plr = PrioritizedLevelReplay(E, buffer_size=2, replay_prob=0.0)
    with pytest.raises(ValueError, match="value_estimates must be finite"):
        plr.update(EpisodeResult(plr.next_task(), 1, 1.0, 3, value_estimates=np.array([0.1, np.nan, 0.3])))


def test_load_state_dict_refuses_states_that_do_not_fit_and_changes_nothing() -> None:
    plr = PrioritizedLevelReplay(E, score="external", buffer_size=8, replay_prob=0.0)
    for i in range(8):
        plr.update(EpisodeResult(plr.next_task(), 1, 1.0, 3, score=0.1 * i))
    state = json.loads(json.dumps(plr.state_dict()))
    with pytest.raises(
        ValueError, match="is for 'RLA-TextNav-v0', this curriculum serves 'RLA-Household-v0'"
    ):
        PrioritizedLevelReplay("RLA-Household-v0", score="external").load_state_dict(state)
    with pytest.raises(ValueError, match="8 levels, more than this buffer_size 2"):
        PrioritizedLevelReplay(E, score="external", buffer_size=2).load_state_dict(state)
    pool = TaskPoolCurriculum(E, pool_size=4)
    with pytest.raises(ValueError, match="4 slots, this pool_size is 2"):
        TaskPoolCurriculum(E, pool_size=2).load_state_dict(pool.state_dict())
    band = SuccessBandCurriculum(E)
    with pytest.raises(ValueError, match="difficulty must be in \\[0, 1\\], got 7.0"):
        band.load_state_dict(dict(band.state_dict(), difficulty=7.0))
    with pytest.raises(ValueError, match="rng is not a numpy generator state"):
        band.load_state_dict(dict(band.state_dict(), difficulty=0.9, rng={"bit_generator": "MT19937"}))
    assert band.difficulty == 0.0  # nothing was loaded
    with pytest.raises(TypeError, match="state must be a dict"):
        band.load_state_dict([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="state lacks \\['recent'\\]"):
        band.load_state_dict({k: v for k, v in band.state_dict().items() if k != "recent"})


def test_task_pool_verdicts_survive_a_resume_and_older_states_load() -> None:
    pool = FreshTaskPoolCurriculum(E, pool_size=1, rollouts_per_task=2)
    for _ in range(2):  # a round all won, then its proposal, judged
        group = pool.next_group(0, 2)
        for task in group:
            pool.update(EpisodeResult(task, 1, 1.0, 3))
    state = json.loads(json.dumps(pool.state_dict()))
    resumed = FreshTaskPoolCurriculum(E, pool_size=1, rollouts_per_task=2)
    resumed.load_state_dict(state)
    assert resumed.verdict(group[0]) == pool.verdict(group[0]) is not None
    older = {k: v for k, v in state.items() if k != "_verdicts"}  # saved before verdicts were
    FreshTaskPoolCurriculum(E, pool_size=1, rollouts_per_task=2).load_state_dict(older)


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: UniformCurriculum(E, seed=-1), ValueError, "seed must be an integer >= 0, got -1"),
        (lambda: UniformCurriculum(E, bounds=(0.1,)), TypeError, "bounds must be a \\(low, high\\) pair"),
        (lambda: UniformCurriculum(E, bounds=None), TypeError, "bounds must be a \\(low, high\\) pair"),
        (
            lambda: CurriculumWrapper(gym.make(E), "plr"),
            TypeError,
            "curriculum must be an rla_gym Curriculum",
        ),
        (
            lambda: CurriculumWrapper(gym.make(E), UniformCurriculum(E), slot="a"),
            ValueError,
            "slot must be an integer >= 0, got 'a'",
        ),
        (
            lambda: CurriculumVectorWrapper(gym.make_vec(E, num_envs=2), None),
            TypeError,
            "curriculum must be an rla_gym Curriculum, got None",
        ),
        (lambda: TaskPoolCurriculum(E, rm_scaled_step="no"), TypeError, "rm_scaled_step must be a bool"),
        (
            lambda: TaskPoolCurriculum(E, fresh_seeds=True, dataset_size=-5),
            ValueError,
            "dataset_size must be > 0, got -5",
        ),
        (
            lambda: AdaptiveDifficultyWrapper(gym.make(E), predict_outcome=5),
            TypeError,
            "predict_outcome must be a function",
        ),
        (lambda: CurriculumWrapper(gym.make(E), PrioritizedLevelReplay(E)), ValueError, "needs_values"),
        (
            lambda: CurriculumVectorWrapper(gym.make_vec(E, num_envs=2), PrioritizedLevelReplay(E)),
            ValueError,
            "needs_values",
        ),
    ],
)
def test_bad_arguments_are_named_at_construction(make, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        make()


def test_numpy_integers_are_integers() -> None:
    assert RewardModelBalanceCurriculum(E, cooldown=np.int64(2)).cooldown == 2


def test_the_loop_s_default_curriculum_takes_its_group_size_and_bounds() -> None:
    """``task-pool-fresh`` (``rla train``'s default) forwards its arguments to the task pool: the
    loop's ``--group-size`` and ``--max-difficulty`` reach it (they did not)."""
    from agents.loop import LoopSettings, _curriculum

    pool = _curriculum(LoopSettings(algo="grpo", mode="env", group_size=4, max_difficulty=0.3), grouped=True)
    assert (pool.rollouts, pool.low, pool.high) == (4, 0.0, 0.3)
    default = _curriculum(LoopSettings(algo="grpo", mode="env"), grouped=True)
    assert (default.rollouts, default.low, default.high) == (8, 0.0, 1.0)


@pytest.mark.parametrize("fresh", [True, False])
def test_more_groups_than_slots_share_their_round_s_verdict(fresh: bool) -> None:
    """A slot handed two groups in a round is judged on the first; the second reads the same
    verdict, so a rejected proposal's rollouts are never trained on (the second got None)."""
    cls = FreshTaskPoolCurriculum if fresh else TaskPoolCurriculum
    pool = cls(E, pool_size=1, rollouts_per_task=2)
    for won in (True, True):  # a round all won proposes a harder task; this round judges it
        groups = [pool.next_group(0, 2), pool.next_group(0, 2)]  # two groups, one slot
        for group in groups:
            for task in group:
                pool.update(EpisodeResult(task, 1 if won else -1, 1.0, 3))
    verdicts = [pool.verdict(group[0]) for group in groups]
    assert verdicts[0] is not None and verdicts == [verdicts[0]] * 2
    assert pool.verdict(groups[0][0]) is None  # every group of the round has read it


def test_learnability_evaluates_a_candidate_in_one_group() -> None:
    """Under a group trainer each candidate's rollouts come as one group (they came as one group
    per rollout: 4 x 8 rollouts where 4 would do), and the candidates are judged after one group each."""
    c = LearnabilityCurriculum(E, candidates=3, rollouts=4, buffer_size=1)
    groups = [c.next_group(0, 8) for _ in range(3)]
    assert [len({t.key for t in g}) for g in groups] == [1, 1, 1] and not c.queue
    assert not any(c.trains_on(g[0]) for g in groups)
    for group, outcome in zip(groups, (1, -1, 1), strict=True):
        for i, task in enumerate(group):
            c.update(EpisodeResult(task, outcome if i % 2 else -outcome, 1.0, 3))
    assert c.refreshes == 1 and c.trains_on(c.next_group(0, 8)[0])
