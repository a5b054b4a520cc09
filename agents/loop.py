"""Setting up the closed loop: its settings, their validation, and the assembled stack.

:class:`LoopSettings` holds one run (``rla train``'s flags are generated from it),
:func:`validate_settings` checks it before anything is built, and :func:`build_loop` puts
together the algorithm and the runtime pieces of :mod:`agents.loop_runtime` (the reward
wrapper and the callback) that the modes ask for.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch
from stable_baselines3.common.vec_env import VecEnv

from agents.curriculum import CurriculumVecEnv
from agents.fields import described
from agents.loop_runtime import (
    GAMMA,
    MODE_FLAGS,
    MODES,
    PROCESS_SCALES,
    IntegratedRewardVecEnv,
    RLAnythingCallback,
    check_mode,
    check_mu,
)
from agents.reward_model import OUTCOME_OBJECTIVES, PRMTrainer, ProcessRewardModel
from rla_gym.core import check_difficulty
from rla_gym.curricula import CURRICULA
from rla_gym.curricula.base import Curriculum

if TYPE_CHECKING:
    from agents.batched_ppo import RolloutOutcomeCallback

#: SB3 on-policy algorithms the loop runs on, and ``batched-ppo`` (``agents.batched_ppo``: PPO in one
#: loop on the array-state vector env, its feedback in arrays; ``vec_env`` does not apply to it).
ALGOS = ("ppo", "a2c", "maskable-ppo", "grpo", "maskable-grpo", "batched-ppo")
#: Vector envs the loop runs on: SB3's DummyVecEnv, or the suite's batched env (agents.vec_env).
VEC_ENVS = ("dummy", "batched")
#: The group trainers (``agents.grpo``): no critic, advantages from groups of rollouts.
GROUP_ALGOS = ("grpo", "maskable-grpo")


#: Named bundles of settings (``--preset``); fields given beside a preset keep their value.
#: ``fast``: PPO on 128 of the suite's batched envs, short rollouts, minibatches of 512, 4 epochs,
#: a higher learning rate, the ``flatten-small`` policy and a PRM of the same size, chosen by
#: ``benchmarks/fast_path_sweep.py``: ~6x the steps/s of the defaults with the same held-out
#: success at 100k steps (``docs/benchmarks.md``).
#: ``lean``: ``agents.batched_ppo.BatchedPPO`` (256 envs x 4 steps, the same update settings, a
#: PRM of the fast preset's size): Outcome-only (``--mode outcome``) ~10x the defaults' steps/s
#: with the same held-out success at 100k steps; the mode is the user's (the full loop by default).
PRESETS: dict[str, dict[str, Any]] = {
    "fast": {"algo": "ppo", "vec_env": "batched", "n_envs": 128, "n_steps": 8, "batch_size": 512,
             "n_epochs": 4, "learning_rate": 1e-3, "encoder": "flatten-small", "prm_embed_dim": 8,
             "prm_hidden": 64},
    "lean": {"algo": "batched-ppo", "n_envs": 256, "n_steps": 4, "batch_size": 512,
             "n_epochs": 4, "learning_rate": 1e-3, "encoder": "flatten-small", "prm_embed_dim": 8,
             "prm_hidden": 64},
}  # fmt: skip
#: ``auto`` (``rla train``'s default preset): settings per env, measured with ``rla train``'s
#: 30k steps (docs/loop.md, "Per-env defaults"). TextNav keeps the paper's loop (the group
#: trainer, the PRM's votes in the reward). On the other envs the group trainer without masks
#: barely learns (Household 0.15 at d = 0), and under MaskablePPO the votes cost held-out success
#: at d = 0.25 (GUI 0.07-0.10 with them, 0.35-0.41 without): their default is MaskablePPO with
#: the curriculum alone (lambda 0 in mode env; the PRM still trains and is logged). It applies
#: only when ``algo`` is not given, and lambda only in mode ``env``.
AUTO_PRESETS: dict[str, dict[str, Any]] = {
    env: {"algo": "maskable-ppo", "lam": 0.0}
    for env in ("RLA-GUI-v0", "RLA-GUI-v1", "RLA-Household-v0", "RLA-Reason-v0")
}
#: ``auto`` in ``rla bench`` (resolved run by run, :func:`agents.bench.run_settings`): MaskablePPO on
#: every env of the suite, TextNav too (a bench compares curricula: it takes the learner that learns
#: on every family, where ``rla train`` keeps the paper's loop on TextNav), and lambda 0 when the
#: bench compares strategies alone. Measured with ``rla bench``'s 50k steps, 3 seeds, in-domain
#: held-out success (docs/bench.md): TextNav 0.54-0.62 (uniform, task-pool) against 0.20-0.44 for
#: PPO (``--preset ''``); Reason 0.27-0.31 against 0.01-0.08.
BENCH_AUTO_PRESETS: dict[str, dict[str, Any]] = {
    env: {"algo": "maskable-ppo", "lam": 0.0} for env in ("RLA-TextNav-v0", *AUTO_PRESETS)
}
#: Every preset name ``--preset`` takes.
PRESET_NAMES = ("auto", *PRESETS)

SettingsT = TypeVar("SettingsT")


def auto_bundle(env: str, mode: str = "env") -> dict[str, Any]:
    """The settings ``auto`` gives one run (``rla train``) on ``env`` in ``mode``: the env's entry
    of :data:`AUTO_PRESETS` (empty for TextNav), lambda only in mode ``env``."""
    bundle = dict(AUTO_PRESETS.get(env, {}))
    if mode != "env":  # lambda 0 is the curriculum alone; the other modes test the votes
        bundle.pop("lam", None)
    return bundle


def apply_preset(settings: SettingsT, given: Collection[str] | None = None) -> SettingsT:
    """``settings`` with the fields of its ``preset`` filled in, and ``preset`` emptied.

    A field named in ``given`` keeps its value; ``given=None`` (the Python API) keeps every
    field that differs from its default. The command line passes the flags it saw.

    ``auto`` on a benchmark (settings with ``envs``) stays ``auto`` for its runs to resolve, one
    env at a time (:func:`agents.bench.run_settings`); ``algo`` given drops it, and a ``lam`` given
    without it is refused where ``auto`` would set another lambda (a comparison of strategies alone).

    Examples:
        >>> fast = apply_preset(LoopSettings(preset="fast", n_envs=64))
        >>> fast.vec_env, fast.n_envs, fast.n_steps, fast.preset
        ('batched', 64, 8, '')
    """
    name = getattr(settings, "preset", "")
    if not name:
        return settings
    if name not in PRESET_NAMES:
        raise ValueError(f"preset must be one of {PRESET_NAMES} or '', got {name!r}")
    per_env = hasattr(settings, "env")
    if name == "auto" and not per_env and not hasattr(settings, "envs"):
        kind = type(settings).__name__
        raise ValueError(f"preset 'auto' picks settings by env: for runs on an env, not {kind}")
    fields = {f.name: f for f in dataclasses.fields(settings)}  # type: ignore[arg-type]

    def explicit(key: str) -> bool:
        return key in given if given is not None else getattr(settings, key) != fields[key].default

    if name != "auto":
        bundle = PRESETS[name]
    elif explicit("algo"):  # the measured pair, or nothing: another trainer keeps the loop's defaults
        bundle = {}
    elif not per_env:  # a benchmark: each run takes its env's settings (agents.bench.run_settings)
        bench: Any = settings
        presets = BENCH_AUTO_PRESETS
        tuned = [env for env in bench.envs if presets.get(env, {}).get("lam", bench.lam) != bench.lam]
        if explicit("lam") and tuned and tuple(bench.modes) == ("env",):
            raise ValueError(
                f"lam {bench.lam!r} with preset 'auto': comparing strategies on "
                f"{', '.join(tuned)}, auto sets lambda 0 there; give --algo with --lam, or --preset ''"
            )
        return settings
    else:
        bundle = auto_bundle(getattr(settings, "env", ""), getattr(settings, "mode", "env"))
    changes: dict[str, Any] = {"preset": ""}
    for key, value in bundle.items():
        if key in fields and not explicit(key):
            changes[key] = value
    return dataclasses.replace(settings, **changes)  # type: ignore[type-var]


def from_loop(name: str, default: Any = dataclasses.MISSING) -> Any:
    """The field ``name`` of :class:`LoopSettings` (its help text, and its default unless
    ``default`` is given), for settings classes that pass it on to the loop (``rla bench``)."""
    field = {f.name: f for f in dataclasses.fields(LoopSettings)}[name]
    return described(field.default if default is dataclasses.MISSING else default, field.metadata["help"])


@dataclasses.dataclass
class LoopSettings:
    """One closed-loop run (``rla train``'s flags are generated from these fields)."""

    env: str = described("RLA-TextNav-v0", "registered rla-gym env id")
    algo: str = described("grpo", f"algorithm: {', '.join(ALGOS)} (grpo: the paper's group trainer)")
    encoder: str = described(
        "flatten",
        "token encoder of the policy: flatten, attention, relational, lookup, lookup-lite, flatten-small, "
        "auto (lookup-lite on TextNav, the GUI and Household, flatten on Reason)",
    )
    mode: str = described(
        "env", f"ablation row: {', '.join(MODES)} (the oracle modes use exact labels: not the method)"
    )
    curriculum: str = described(
        "task-pool-fresh",
        f"curriculum strategy of mode env: {', '.join(CURRICULA)} (the default keeps the paper's "
        "task-pool rule)",
    )
    objective: str = described(
        "value-difference", f"PRM objective, trained from outcomes alone: {', '.join(OUTCOME_OBJECTIVES)}"
    )
    lam: float = described(1.0, "lambda: weight of the process part of the reward")
    m: int = described(3, "PRM votes per step")
    process_scale: str = described(
        "step",
        "how votes reach the learner: lambda * mean vote in every step's reward (step, sums over the "
        "return), / step budget (episode), or lambda * z(mean vote) in PPO's advantage (advantage)",
    )
    mu: float = described(1.5, "vote quality of mode noisy-oracle: p+ + p- in [0, 2] (1: none, 2: exact)")
    prm_epochs: int = described(1, "PRM training passes per rollout")
    prm_replay: int = described(1, "recent rollouts the PRM trains on (1: this one, the paper's)")
    prm_embed_dim: int = described(16, "PRM token embedding size")
    prm_hidden: int = described(128, "PRM hidden layer width (two layers)")
    group_size: int = described(8, "grpo: rollouts per task (a group)")
    groups: int = described(8, "grpo: tasks per round (its envs: groups * group_size)")
    group_filter: str = described(
        "all", "grpo: all (keep every group) or mixed (drop all-success / all-fail)"
    )
    n_envs: int = described(4, "vectorised envs")
    n_steps: int = described(256, "rollout length per env")
    vec_env: str = described("dummy", "dummy (SB3's DummyVecEnv) or batched (the suite's batched vector env)")
    batch_size: int = described(0, "minibatch size of PPO and the group trainer (0: n_steps, grpo: 256)")
    n_epochs: int = described(10, "passes over each rollout (PPO) or round (the group trainer)")
    ent_coef: float = described(0.0, "entropy bonus (PPO, A2C, the group trainer)")
    learning_rate: float = described(0.0, "policy learning rate (0: the algorithm's default, 3e-4; A2C 7e-4)")
    difficulty: float = described(0.2, "difficulty of every mode but env (those keep it fixed)")
    max_difficulty: float = described(1.0, "curricula stay within [0, this]")
    seed: int = described(0, "seed of the run")
    device: str = described("auto", "torch device: auto (CUDA when there is one), cpu, cuda[:N]")
    history: int = described(
        0,
        "observations and actions the policy sees (0: the current observation only; k: the last k "
        "of each, agents.history; PPO, A2C, MaskablePPO, the group trainer)",
    )
    preset: str = described(
        "",
        f"settings bundle ({', '.join(PRESETS)}; fast: PPO on 128 batched envs, lean: the lean "
        "batched-ppo; auto: per env, rla train's and rla bench's default); flags given with it win",
    )


def ignored_settings(settings: LoopSettings, given: Collection[str]) -> list[str]:
    """Notes on the fields in ``given`` (the flags a user typed) that ``settings`` does not read:
    each names the flag and why (``rla train`` prints them, then trains as asked).

    Examples:
        >>> ignored_settings(LoopSettings(mode="env", difficulty=0.5), {"difficulty"})[0][:47]
        "--difficulty: mode env's curriculum 'task-pool-"
    """
    flags = MODE_FLAGS[settings.mode]
    curriculum = flags.adapts_env and settings.curriculum != "fixed"
    rules = {
        "difficulty": (
            curriculum,
            f"mode env's curriculum {settings.curriculum!r} picks every episode's level "
            "(--max-difficulty bounds it; --curriculum fixed trains at --difficulty)",
        ),
        "max_difficulty": (not curriculum, "only a curriculum of mode env reads it"),
        "curriculum": (not flags.adapts_env, f"mode {settings.mode} keeps --difficulty fixed"),
        "mu": (flags.votes != "noisy", "only mode noisy-oracle reads it"),
        **dict.fromkeys(
            ("lam", "m", "process_scale"), (flags.votes == "none", f"mode {settings.mode} casts no votes")
        ),
        **dict.fromkeys(
            ("objective", "prm_epochs", "prm_replay"),
            (not flags.trains_prm, f"mode {settings.mode} trains no PRM"),
        ),
        **dict.fromkeys(
            ("group_size", "groups", "group_filter"),
            (settings.algo not in GROUP_ALGOS, f"only the group trainer {GROUP_ALGOS} reads it"),
        ),
        **dict.fromkeys(
            ("n_envs", "n_steps"),
            (settings.algo in GROUP_ALGOS, "the group trainer runs --groups x --group-size envs"),
        ),
    }
    return [
        f"--{name.replace('_', '-')}: {why}; ignored"
        for name, (ignored, why) in rules.items()
        if name in given and ignored
    ]


def check_steps(settings: LoopSettings, steps: Any) -> None:
    """Raise unless ``steps`` covers at least one rollout of ``settings`` (a round of the group
    trainer: ``groups * group_size`` episodes of at least one step each; ``n_steps * n_envs``
    steps for the others), so that a run trains as many steps as it records."""
    if settings.algo in GROUP_ALGOS:
        least, what = settings.groups * settings.group_size, "one round (groups * group_size episodes"
        what += f" = {least}, each at least one step)"
    else:
        least = settings.n_steps * settings.n_envs
        what = f"one rollout (n_steps * n_envs = {least})"
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < least:
        raise ValueError(f"steps must be >= {what}, got {steps!r}")


def validate_settings(settings: LoopSettings) -> None:
    """Raise a clear error for any bad setting, before anything is built or written."""
    from agents.policies import resolve_encoder
    from rla_gym.registration import make_rla_env

    if settings.preset and settings.preset not in PRESETS:
        raise ValueError(f"preset must be one of {tuple(PRESETS)} or '', got {settings.preset!r}")
    check_mode(settings.mode)
    if settings.process_scale not in PROCESS_SCALES:
        raise ValueError(f"process_scale must be one of {PROCESS_SCALES}, got {settings.process_scale!r}")
    check_mu(settings.mu)
    if settings.vec_env not in VEC_ENVS:
        raise ValueError(f"vec_env must be one of {VEC_ENVS}, got {settings.vec_env!r}")
    for name, least in (("batch_size", 0), ("n_epochs", 1), ("prm_embed_dim", 1), ("prm_hidden", 1)):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    for name in ("ent_coef", "learning_rate"):
        value = getattr(settings, name)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not np.isfinite(value)
            or value < 0
        ):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if settings.algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got {settings.algo!r}")
    rollout, batch = settings.n_steps * settings.n_envs, settings.batch_size or settings.n_steps
    if settings.algo == "maskable-ppo" and (batch == 1 or rollout % batch == 1):
        # MaskablePPO normalises each minibatch's advantages without PPO's guard: one sample is NaN
        raise ValueError(
            f"minibatches of {batch} (batch_size {settings.batch_size}, 0: n_steps) leave a "
            f"minibatch of one sample from rollouts of n_steps * n_envs = {rollout}, whose "
            "advantages MaskablePPO cannot normalise; choose another batch_size"
        )
    if isinstance(settings.history, bool) or not isinstance(settings.history, int) or settings.history < 0:
        raise ValueError(f"history must be an integer >= 0 (0: no history), got {settings.history!r}")
    if settings.algo in GROUP_ALGOS:
        from agents.grpo import keeps_group

        keeps_group([1], settings.group_filter)
        if settings.process_scale != "step":
            raise ValueError(
                f"process_scale {settings.process_scale!r} is for the critic algorithms; {settings.algo} "
                "puts R_i = O + lambda * mean vote into its group advantages (leave process_scale 'step')"
            )
        for name in ("group_size", "groups"):
            value = getattr(settings, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < (2 if name == "group_size" else 1)
            ):
                raise ValueError(
                    f"{name} must be an integer >= {2 if name == 'group_size' else 1}, got {value!r}"
                )
    resolve_encoder(settings.encoder, settings.env)  # "auto" or one of ENCODERS
    if settings.curriculum not in CURRICULA:
        raise ValueError(f"curriculum must be one of {sorted(CURRICULA)}, got {settings.curriculum!r}")
    if settings.objective not in OUTCOME_OBJECTIVES:
        raise ValueError(
            f"objective must be one of {OUTCOME_OBJECTIVES} (trained from outcomes alone), "
            f"got {settings.objective!r}"
        )
    if isinstance(settings.lam, bool) or not np.isfinite(settings.lam) or settings.lam < 0:
        raise ValueError(f"lam must be a finite number >= 0, got {settings.lam!r}")
    for name in ("m", "prm_epochs", "prm_replay", "n_envs", "n_steps"):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if isinstance(settings.seed, bool) or not isinstance(settings.seed, int) or settings.seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {settings.seed!r}")
    check_difficulty(settings.difficulty)
    if check_difficulty(settings.max_difficulty, "max_difficulty") == 0:
        raise ValueError("max_difficulty must be > 0, got 0")
    if settings.difficulty > settings.max_difficulty:
        raise ValueError(
            f"difficulty {settings.difficulty!r} is above max_difficulty {settings.max_difficulty!r}"
        )
    if settings.objective.startswith("consistency") and settings.m < 2:
        raise ValueError(f"objective {settings.objective!r} needs m >= 2 votes, got {settings.m}")
    if settings.algo != "a2c" and settings.n_steps * settings.n_envs < 2:
        raise ValueError(
            f"n_steps * n_envs must be >= 2 for {settings.algo}'s minibatches, got {settings.n_steps}"
        )
    try:
        device = torch.device(settings.device) if settings.device != "auto" else None
    except RuntimeError as error:
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {settings.device!r}") from error
    if device is not None and device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {settings.device!r} asked for, but CUDA is not available here")
    make_rla_env(settings.env).close()
    if settings.algo == "batched-ppo":
        _check_batched_ppo(settings)


def _check_batched_ppo(settings: LoopSettings) -> None:
    """``batched-ppo`` runs every mode but ``oracle-potential``, without history, with the curricula
    that do not score episodes with the learner's value estimates."""
    from agents.batched_loop import BATCHED_MODES

    if settings.mode not in BATCHED_MODES:
        raise ValueError(
            f"mode {settings.mode!r} is not for algo batched-ppo: it runs the modes {BATCHED_MODES}"
        )
    if MODE_FLAGS[settings.mode].adapts_env and settings.curriculum != "fixed":
        curriculum = _curriculum(settings)
        if curriculum.needs_values:
            raise ValueError(
                f"curriculum {settings.curriculum!r} scores episodes with the learner's value estimates: "
                "not for algo batched-ppo (use algo ppo, or another curriculum)"
            )
    if settings.history:
        raise ValueError(f"history {settings.history} is not for algo batched-ppo (leave history 0)")
    if settings.batch_size == 1:
        raise ValueError("batch_size must be >= 2 for batched-ppo (0: 512), got 1")


def _curriculum(settings: LoopSettings, *, grouped: bool = False) -> Curriculum:
    """The curriculum of mode ``env`` (``FixedCurriculum`` at ``difficulty`` for ``fixed``)."""
    from rla_gym.curricula import FixedCurriculum, PrioritizedLevelReplay

    if settings.curriculum == "fixed":
        return FixedCurriculum(settings.env, settings.difficulty, seed=settings.seed)
    kwargs = curriculum_kwargs(settings.curriculum, settings.max_difficulty)
    cls = CURRICULA[settings.curriculum]
    if grouped and _takes(cls, "rollouts_per_task"):
        kwargs["rollouts_per_task"] = settings.group_size  # a group is one round of a task
    if grouped and issubclass(cls, PrioritizedLevelReplay):  # no critic: the trainer scores episodes
        kwargs["score"] = "external"
    curriculum: Curriculum = cls(settings.env, seed=settings.seed, **kwargs)
    return curriculum


def _batched_ppo(settings: LoopSettings) -> tuple[Any, RLAnythingCallback | RolloutOutcomeCallback]:
    """``BatchedPPO`` from the settings (batch_size 0: 512, learning_rate 0: 1e-3) and its callback:
    the history of Outcome-only rows, or the closed loop's (PRM training, metrics)."""
    import gymnasium as gym
    from stable_baselines3.common.utils import get_device

    from agents.batched_loop import BatchedLoopCallback
    from agents.batched_ppo import BatchedPPO, RolloutOutcomeCallback

    flags, device = MODE_FLAGS[settings.mode], str(get_device(settings.device))
    prm = None
    if flags.uses_prm:
        prm = ProcessRewardModel.for_env(
            gym.make(settings.env), head="value" if settings.objective == "value-difference" else "step",
            embed_dim=settings.prm_embed_dim, hidden=settings.prm_hidden, device=device, seed=settings.seed,
        )  # fmt: skip
    curriculum = None
    if flags.adapts_env and settings.curriculum != "fixed":  # fixed: the difficulty stays put
        curriculum = _curriculum(settings)
    model = BatchedPPO(
        settings.env, difficulty=settings.difficulty, n_envs=settings.n_envs, n_steps=settings.n_steps,
        batch_size=settings.batch_size or 512, n_epochs=settings.n_epochs,
        learning_rate=settings.learning_rate or 1e-3, gamma=GAMMA, ent_coef=settings.ent_coef,
        encoder=settings.encoder, seed=settings.seed, device=device, mode=settings.mode, prm=prm,
        lam=settings.lam, m=settings.m, process_scale=settings.process_scale, mu=settings.mu,
        curriculum=curriculum,
    )  # fmt: skip
    if model.feedback is None:
        return model, RolloutOutcomeCallback(settings.difficulty)
    trainer = None
    if prm is not None and flags.trains_prm:
        trainer = PRMTrainer(prm, settings.objective, lam=settings.lam, m=settings.m, seed=settings.seed)
    callback = BatchedLoopCallback(
        model.feedback, trainer, curriculum, prm_epochs=settings.prm_epochs, prm_replay=settings.prm_replay
    )
    return model, callback


def _algorithm(settings: LoopSettings, venv: VecEnv) -> Any:
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.buffers import DictRolloutBuffer

    from agents.curriculum import masked_buffer_class
    from agents.policies import MaskableTokenPolicy, TokenPolicy

    if settings.algo == "maskable-ppo":
        from sb3_contrib.common.maskable.buffers import MaskableDictRolloutBuffer

        buffer: type = MaskableDictRolloutBuffer
    else:
        buffer = DictRolloutBuffer
    common: dict[str, Any] = {
        "rollout_buffer_class": masked_buffer_class(buffer),
        "gamma": GAMMA,
        "n_steps": settings.n_steps,
        "seed": settings.seed,
        "device": settings.device,
        "policy_kwargs": {"features_extractor_kwargs": {"encoder": settings.encoder}},
    }
    if settings.learning_rate:
        common["learning_rate"] = settings.learning_rate
    if settings.algo == "a2c":
        return A2C(TokenPolicy, venv, ent_coef=settings.ent_coef, **common)
    ppo: dict[str, Any] = {
        "batch_size": settings.batch_size or settings.n_steps,
        "n_epochs": settings.n_epochs,
        "ent_coef": settings.ent_coef,
    }
    if settings.algo == "maskable-ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO(MaskableTokenPolicy, venv, **ppo, **common)
    return PPO(TokenPolicy, venv, **ppo, **common)


def _takes(cls: type, name: str) -> bool:
    """Whether ``cls(...)`` takes keyword ``name``: in its ``__init__``, or in a parent's that a
    ``**kwargs`` passes it to (``FreshTaskPoolCurriculum`` forwards to ``TaskPoolCurriculum``)."""
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        parameters = inspect.signature(klass.__init__).parameters  # type: ignore[misc]
        if name in parameters:
            return True
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            return False
    return False


def curriculum_kwargs(name: str, max_difficulty: float) -> dict[str, Any]:
    """Constructor arguments that keep curriculum ``name`` within [0, max_difficulty] in the loop.

    A strategy added to ``rla_gym.curricula.CURRICULA`` gets ``bounds=(0, max_difficulty)``
    if its constructor takes ``bounds``, and nothing otherwise.
    """
    top = check_difficulty(max_difficulty, "max_difficulty")
    if name == "rm-balance":  # its wrapper's default lower bound is 0.1
        return {"bounds": (min(0.1, top / 2), top)}
    if name in CURRICULA and _takes(CURRICULA[name], "bounds"):
        return {"bounds": (0.0, top)}
    return {}


def build_loop(settings: LoopSettings) -> tuple[Any, RLAnythingCallback | RolloutOutcomeCallback]:
    """An SB3 on-policy algorithm (``algo``: PPO, A2C or MaskablePPO) on the stack the mode asks for.

    ``algo="batched-ppo"``: ``agents.batched_ppo.BatchedPPO`` with the mode's feedback
    (``agents.batched_loop``) and curriculum on its batched env, and
    :class:`~agents.batched_loop.BatchedLoopCallback` (Outcome-only:
    :class:`~agents.batched_ppo.RolloutOutcomeCallback`).

    Stack: ``make_vec_env`` -> :class:`IntegratedRewardVecEnv` -> ``CurriculumVecEnv``
    (mode ``env``; other modes train at the fixed ``difficulty``) -> ``HistoryVecEnv``
    (``history`` > 0: the policy sees the last ``history`` observations and actions; the PRM
    and the curriculum see the env's own observations and episodes).
    """
    from stable_baselines3.common.env_util import make_vec_env

    from agents.policies import resolve_encoder
    from rla_gym.curricula import FixedCurriculum

    settings = apply_preset(settings)
    validate_settings(settings)
    settings = dataclasses.replace(settings, encoder=resolve_encoder(settings.encoder, settings.env))
    if settings.algo == "batched-ppo":
        return _batched_ppo(settings)
    grouped = settings.algo in GROUP_ALGOS
    n_envs = settings.groups * settings.group_size if grouped else settings.n_envs
    if settings.vec_env == "batched":
        from agents.vec_env import BatchedVecEnv

        venv: VecEnv = BatchedVecEnv(settings.env, n_envs, seed=settings.seed)
    else:
        venv = make_vec_env(f"rla_gym:{settings.env}", n_envs=n_envs, seed=settings.seed)
    prm = None
    flags = MODE_FLAGS[settings.mode]
    if flags.uses_prm:
        head = "value" if settings.objective == "value-difference" else "step"
        prm = ProcessRewardModel.for_env(
            venv.envs[0],  # type: ignore[attr-defined]
            head=head, embed_dim=settings.prm_embed_dim, hidden=settings.prm_hidden, device=settings.device,
            seed=settings.seed,
        )  # fmt: skip
    reward_env = IntegratedRewardVecEnv(
        venv, prm, mode=settings.mode, lam=settings.lam, m=settings.m, seed=settings.seed,
        deferred=not grouped, process_scale=settings.process_scale, mu=settings.mu,
    )  # fmt: skip
    if flags.adapts_env and settings.curriculum != "fixed":
        curriculum = _curriculum(settings, grouped=grouped)
    else:  # the ablation rows below the full loop keep the difficulty fixed
        curriculum = FixedCurriculum(settings.env, settings.difficulty, seed=settings.seed)
    top: CurriculumVecEnv | None = None
    if grouped:  # the group trainer asks the curriculum for groups and steps the envs itself
        model = _group_algorithm(settings, venv, reward_env, curriculum)
    else:
        top = CurriculumVecEnv(reward_env, curriculum)
        learner_env: VecEnv = top
        if settings.history:
            from agents.history import HistoryVecEnv

            learner_env = HistoryVecEnv(top, settings.history)
        model = _algorithm(settings, learner_env)
    trainer = None
    if prm is not None and flags.trains_prm:
        trainer = PRMTrainer(prm, settings.objective, lam=settings.lam, m=settings.m, seed=settings.seed)
    callback = RLAnythingCallback(
        reward_env, trainer, curriculum, prm_epochs=settings.prm_epochs, prm_replay=settings.prm_replay,
        curriculum_env=top,
    )  # fmt: skip
    return model, callback


def _group_algorithm(
    settings: LoopSettings, venv: VecEnv, reward_env: IntegratedRewardVecEnv, curriculum: Curriculum
) -> Any:
    from agents.grpo import GroupPPO
    from agents.policies import MaskableTokenPolicy, TokenPolicy

    masked = settings.algo == "maskable-grpo"
    optional: dict[str, Any] = {"learning_rate": settings.learning_rate, "batch_size": settings.batch_size}
    return GroupPPO(
        MaskableTokenPolicy if masked else TokenPolicy, venv, reward_env=reward_env, curriculum=curriculum,
        group_size=settings.group_size, group_filter=settings.group_filter, masked=masked,
        history=settings.history, n_epochs=settings.n_epochs, ent_coef=settings.ent_coef,
        **{name: value for name, value in optional.items() if value},  # 0: the trainer's default
        policy_kwargs={"features_extractor_kwargs": {"encoder": settings.encoder}},
        seed=settings.seed, device=settings.device,
    )  # fmt: skip
