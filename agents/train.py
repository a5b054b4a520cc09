"""``rla train`` / ``rla eval``: run the closed loop with checkpoints, resume it, evaluate it.

A run directory holds ``settings.json``, ``checkpoint.pt`` (everything needed to resume:
policy, PRM, both optimizers, curriculum state, RNG states, step counter, history),
``progress.csv`` (SB3's logger; TensorBoard too when the ``tensorboard`` package is
installed) and, at the end, ``results.json``. Checkpoints are written to a temporary file
and renamed into place, so a crash never leaves a half-written checkpoint.

``--algo batched-ppo`` (``agents.batched_ppo``): its checkpoint holds the same (its own
generator too, and the PRM's state and the curriculum's in the closed loop's modes) but not the
vector env's episodes: a resumed run continues from the checkpoint with fresh episodes, so it is
not step-for-step the run that was never interrupted.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import random
import time
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.logger import CSVOutputFormat, Logger, make_output_format

from agents.atomic import read_json, replace_atomically, write_text_atomic
from agents.batched_ppo import BatchedPPO, RolloutOutcomeCallback
from agents.fields import described, noted
from agents.loop import LoopSettings, apply_preset, build_loop, check_steps, validate_settings
from agents.loop_runtime import MODE_FLAGS, RLAnythingCallback
from agents.policies import resolve_encoder
from agents.trajectories import Trajectory
from rla_gym.evaluation import evaluate, heldout_seeds

CHECKPOINT_FORMAT = "rla-gym-checkpoint/1"
EVAL_LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclasses.dataclass
class TrainSettings(LoopSettings):
    """A closed-loop training run (``encoder`` "auto" by default: the run records what it resolves to).

    ``preset`` is "" (the loop's own defaults) here and "auto" on the command line
    (:class:`TrainCommandSettings`); ``TrainSettings(preset="auto")`` asks for it in Python."""

    encoder: str = described(
        "auto",
        "token encoder of the policy: auto (lookup-lite on TextNav, the GUI and Household, flatten on "
        "Reason), flatten, attention, relational, lookup, lookup-lite, flatten-small",
    )
    steps: int = described(30_000, "env steps to train (rounded up to whole rollouts)")
    out: str = described("", "run directory (empty: runs/<env>-<algo>-<mode>-<time>)")
    resume: bool = described(False, "continue the run in --out")
    checkpoint_every: int = described(4096, "env steps between checkpoints")
    eval_episodes: int = described(100, "held-out tasks per difficulty in the final evaluation")


@dataclasses.dataclass
class TrainCommandSettings(TrainSettings):
    """``rla train``'s settings: :class:`TrainSettings` with the ``auto`` preset by default."""

    algo: str = noted(
        TrainSettings, "algo", "under --preset auto: maskable-ppo on the GUI, Household and Reason"
    )
    lam: float = noted(
        TrainSettings, "lam", "under --preset auto: 0 in mode env on the GUI, Household and Reason"
    )
    preset: str = described(
        "auto",
        "settings bundle: auto (the default: without --algo, MaskablePPO on all but TextNav, with the "
        "curriculum alone, lambda 0, in mode env; TextNav keeps the paper's loop), fast (PPO on 128 "
        "batched envs), lean (the lean batched-ppo), '' (none); flags given with it win",
    )


def _atomic_save(payload: dict[str, Any], path: Path) -> None:
    replace_atomically(path, lambda temporary: torch.save(payload, temporary))


def _numpy_global_state() -> list[Any]:
    """SB3 shuffles minibatches with numpy's global (legacy) RNG, so it is saved too."""
    state: Any = np.random.get_state()  # noqa: NPY002
    kind, keys, pos, has_gauss, cached = state
    return [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)]


def _trajectory_state(trajectory: Trajectory) -> dict[str, Any]:
    """A trajectory in types ``torch.load(weights_only=True)`` reads back."""
    state = dataclasses.asdict(trajectory)
    state["outcome"], state["task_id"] = int(state["outcome"]), str(state["task_id"])
    if state["difficulty"] is not None:
        state["difficulty"] = float(state["difficulty"])
    for key in ("obs", "actions", "next_obs", "labels"):
        if state[key] is not None:
            state[key] = torch.from_numpy(np.ascontiguousarray(state[key]))
    return state


def _trajectory(state: dict[str, Any]) -> Trajectory:
    arrays = {k: state[k].numpy() for k in ("obs", "actions", "next_obs", "labels") if state[k] is not None}
    return Trajectory(**{**state, **arrays})


#: The callback ``build_loop`` returns: the closed loop's, or batched-ppo's history.
LoopCallback = RLAnythingCallback | RolloutOutcomeCallback


def _replay_to_keep(callback: RLAnythingCallback) -> list[list[Trajectory]]:
    """The PRM's window minus its oldest rollout, which the next rollout pushes out unused."""
    keep = (callback.replay.maxlen or 1) - 1
    return list(callback.replay)[max(0, len(callback.replay) - keep) :] if keep else []


def _loop_state(callback: LoopCallback) -> dict[str, Any]:
    """The closed loop's own state: PRM, its optimizer and RNGs, curriculum, replay (None without)."""
    if not isinstance(callback, RLAnythingCallback):
        keys = (
            "prm", "prm_optimizer", "prm_rng", "prm_votes_rng", "reward_votes_rng", "reward_flips_rng",
            "curriculum",
        )  # fmt: skip
        return {**dict.fromkeys(keys), "prm_replay": []}
    prm, trainer, reward_env = callback.reward_env.prm, callback.trainer, callback.reward_env
    return {
        "prm": None if prm is None else prm.state_dict(),
        "prm_optimizer": None if trainer is None else trainer.optimizer.state_dict(),
        "prm_rng": None if trainer is None else trainer.rng.bit_generator.state,
        "prm_votes_rng": None if trainer is None else trainer.generator.get_state(),
        "reward_votes_rng": None if reward_env.generator is None else reward_env.generator.get_state(),
        "reward_flips_rng": reward_env.rng.bit_generator.state,  # noisy-oracle's vote flips
        "curriculum": None if callback.curriculum is None else callback.curriculum.state_dict(),
        "prm_replay": [[_trajectory_state(t) for t in rollout] for rollout in _replay_to_keep(callback)],
    }


def save_checkpoint(path: Path, settings: TrainSettings, model: Any, callback: LoopCallback) -> None:
    """Everything needed to resume, written atomically."""
    payload = {
        "format": CHECKPOINT_FORMAT,
        "settings": dataclasses.asdict(settings),
        "num_timesteps": int(model.num_timesteps),
        "n_updates": int(model._n_updates),
        "policy": model.policy.state_dict(),
        "policy_optimizer": model.policy.optimizer.state_dict(),
        **_loop_state(callback),
        "history": callback.history,
        "rng": {
            "torch": torch.get_rng_state(),
            # SB3's CUDA sampling draws from the CUDA generators (None without CUDA)
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "numpy": _numpy_global_state(),
            "python": random.getstate(),
            # batched-ppo samples actions and minibatches with its own generator
            "algo": model.generator.get_state() if isinstance(model, BatchedPPO) else None,
        },
    }
    _atomic_save(payload, path)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint (``weights_only=True``); a corrupt or foreign file raises ``ValueError``."""
    try:
        payload = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as error:  # torch raises several types for unreadable files
        # torch's message suggests weights_only=False, which would run arbitrary code from the file
        raise ValueError(f"{path} is not a readable rla-gym checkpoint ({type(error).__name__})") from error
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not an rla-gym checkpoint (format {CHECKPOINT_FORMAT!r} expected)")
    return payload


def _set_generator(generator: torch.Generator, state: torch.Tensor, seed: int) -> None:
    """Restore a torch generator's ``state``. One saved on another kind of device (a run made on
    CUDA resumed on the CPU, or the reverse) does not fit: the generator is seeded with ``seed``
    instead, and a warning says the resumed run's draws differ from the run continued in place."""
    if state.numel() == generator.get_state().numel():
        generator.set_state(state)
        return
    generator.manual_seed(seed)
    warnings.warn(
        f"a random generator of the run was saved on another kind of device than {generator.device}: "
        f"it continues from seed {seed}, so the resumed run draws other numbers than it would have",
        RuntimeWarning,
        stacklevel=3,
    )


def _restore(payload: dict[str, Any], model: Any, callback: LoopCallback) -> None:
    model.policy.load_state_dict(payload["policy"])
    model.policy.optimizer.load_state_dict(payload["policy_optimizer"])
    model.num_timesteps = payload["num_timesteps"]
    model._n_updates = payload["n_updates"]
    if isinstance(model, BatchedPPO) and payload["rng"].get("algo") is not None:
        _set_generator(model.generator, payload["rng"]["algo"], int(payload["num_timesteps"]))
    callback.history = list(payload["history"])
    if isinstance(callback, RLAnythingCallback):
        _restore_loop(payload, callback)
    torch.set_rng_state(payload["rng"]["torch"])
    cuda = payload["rng"].get("cuda")  # a run saved on CUDA, resumed where CUDA has as many devices
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)
    kind, keys, pos, has_gauss, cached = payload["rng"]["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))  # noqa: NPY002
    random.setstate(payload["rng"]["python"])


def _restore_loop(payload: dict[str, Any], callback: RLAnythingCallback) -> None:
    """The closed loop's own state (see :func:`_loop_state`)."""
    prm, trainer, steps = callback.reward_env.prm, callback.trainer, int(payload["num_timesteps"])
    if prm is not None and payload["prm"] is not None:
        prm.load_state_dict(payload["prm"])
    if trainer is not None and payload["prm_optimizer"] is not None:
        trainer.optimizer.load_state_dict(payload["prm_optimizer"])
        trainer.rng.bit_generator.state = payload["prm_rng"]
        _set_generator(trainer.generator, payload["prm_votes_rng"], steps + 1)
    if callback.reward_env.generator is not None and payload["reward_votes_rng"] is not None:
        _set_generator(callback.reward_env.generator, payload["reward_votes_rng"], steps + 2)
    if payload.get("reward_flips_rng") is not None:  # checkpoints from before it hold none
        callback.reward_env.rng.bit_generator.state = payload["reward_flips_rng"]
    if callback.curriculum is not None and payload["curriculum"] is not None:
        callback.curriculum.load_state_dict(payload["curriculum"])
    callback.replay.clear()  # checkpoints from before the replay option hold none
    callback.replay.extend([[_trajectory(t) for t in rollout] for rollout in payload.get("prm_replay", [])])


class CheckpointCallback(BaseCallback):
    """Saves a checkpoint every ``every`` steps (at rollout ends) and shows a progress bar."""

    def __init__(
        self, path: Path, settings: TrainSettings, loop: LoopCallback, every: int, total: int
    ) -> None:
        super().__init__()
        self.path, self.settings, self.loop, self.every, self.total = path, settings, loop, every, total
        self._last = 0
        self._bar: Any = None

    def _on_training_start(self) -> None:
        self._last = self.model.num_timesteps
        try:
            from tqdm import tqdm
        except ImportError:  # the progress bar is a convenience
            return
        # disable=None: no bar where the output is not a terminal (logs, CI)
        self._bar = tqdm(
            total=self.total, initial=self.model.num_timesteps, unit="step", desc="rla train", disable=None
        )

    def _on_step(self) -> bool:
        if self._bar is not None:
            self._bar.n = self.model.num_timesteps
            if self._bar.n > self._bar.total:  # the last rollout overshoots the target
                self._bar.total = self._bar.n
        return True

    def _show_success(self) -> None:
        """The last logged rollout's training success on the progress bar (read when a rollout
        starts: a trainer may log a rollout's row after its update)."""
        if self._bar is not None and self.loop.history:
            self._bar.set_postfix(success=f"{self.loop.history[-1]['loop/success']:.2f}")
            self._bar.refresh()

    def _on_rollout_start(self) -> None:
        self._show_success()
        # SB3 trains on a rollout after its rollout_end and before the next rollout_start: saving
        # here keeps the step counter and the policy / optimizer consistent
        if self.model.num_timesteps - self._last >= self.every:
            save_checkpoint(self.path, self.settings, self.model, self.loop)
            self._last = self.model.num_timesteps

    def _on_training_end(self) -> None:
        self._show_success()
        if self._bar is not None:
            self._bar.close()


class ResumableCSVOutputFormat(CSVOutputFormat):
    """SB3's CSV log, but a resumed run keeps its earlier rows.

    With ``keep_until`` (the checkpoint's step count) the rows logged up to that step stay and
    the rows past it, which the resumed run trains again, go; new rows follow. Without it the
    file starts empty, as SB3's does.
    """

    def __init__(self, filename: str, keep_until: int | None = None) -> None:
        kept: list[dict[str, str]] = []
        header: list[str] = []
        if keep_until is not None and os.path.exists(filename):
            with open(filename, newline="") as f:
                reader = csv.DictReader(f)
                header = list(reader.fieldnames or [])
                kept = [row for row in reader if float(row.get("time/total_timesteps") or 0) <= keep_until]
        super().__init__(filename)
        if header:
            self.keys = header
            writer = csv.writer(self.file, lineterminator="\n")
            writer.writerow(header)
            writer.writerows([[row.get(key, "") for key in header] for row in kept])
            self.file.flush()


#: What to do about a run's settings.json that is not valid JSON.
_SETTINGS_REMEDY = (
    "restore it, or delete it and give the run's settings as flags with --resume "
    "(the checkpoint holds them: a flag that differs is named)"
)


def _record_resume(path: Path, settings: TrainSettings, at: int) -> None:
    """settings.json gets the new step target and a record of the resume."""
    saved = read_json(path, _SETTINGS_REMEDY) if path.exists() else dataclasses.asdict(settings)
    saved["resumes"] = [*saved.get("resumes", []), {"at_step": at, "steps": settings.steps}]
    saved["steps"] = settings.steps
    write_text_atomic(path, json.dumps(saved, indent=2) + "\n")


#: Fields a resumed run never takes from its settings.json.
_NOT_RESUMED = ("out", "resume", "preset")


def resume_settings(settings: TrainSettings, given: Collection[str]) -> TrainSettings:
    """``rla train --out DIR --resume``'s settings: the run's own (its ``settings.json``), with
    the fields named in ``given`` (the flags on the command line) as given.

    So ``--resume`` alone continues a run to the step target it was started (or last resumed)
    with, and ``--resume --steps N`` moves that target; a flag that changes the loop is still
    refused by :func:`train`, which compares against the checkpoint.
    """
    if not settings.out or not (Path(settings.out) / "settings.json").exists():
        return settings  # train() says what is missing
    saved = read_json(Path(settings.out) / "settings.json", _SETTINGS_REMEDY)
    names = {f.name for f in dataclasses.fields(TrainSettings)} - set(_NOT_RESUMED) - set(given)
    resumed = dataclasses.replace(settings, **{k: v for k, v in saved.items() if k in names})
    # the run's settings hold what its preset gave: a default preset would overwrite them
    return resumed if "preset" in given else dataclasses.replace(resumed, preset="")


def _loop_fields(settings: TrainSettings) -> dict[str, Any]:
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(LoopSettings)}


def _saved_encoder(payload: dict[str, Any]) -> str:
    """The encoder a checkpoint's run trained (runs from before it was saved trained flatten)."""
    return str(payload["settings"].get("encoder", "flatten"))


#: Loop settings a resumed run may change: where it runs, not what it trains (the checkpoint
#: loads onto the CPU and from there onto the run's device).
_RESUMABLE_ELSEWHERE = ("device",)


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during ``rla train``; the message says where the last checkpoint is."""


def _interrupted(out: Path, checkpoint: Path) -> TrainingInterrupted:
    if checkpoint.exists():
        return TrainingInterrupted(
            f"interrupted; the last checkpoint is at {checkpoint}: "
            f"continue with rla train --out {out} --resume"
        )
    return TrainingInterrupted(
        f"interrupted before the first checkpoint; start again with rla train --out {out} and the same flags"
    )


def train(settings: TrainSettings) -> dict[str, Any]:
    """Run (or resume) a closed-loop training run; returns the results written to results.json,
    and the run directory under ``"out"``."""
    settings = apply_preset(settings)  # the run records the settings the preset gave
    if not settings.out:
        if settings.resume:
            raise ValueError("--resume needs --out, the run directory to continue")
        settings.out = f"runs/{settings.env}-{settings.algo}-{settings.mode}-{time.strftime('%Y%m%d-%H%M%S')}"
    out = Path(settings.out)
    checkpoint = out / "checkpoint.pt"
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a run directory; choose another --out")
    check_steps(settings, settings.steps)
    if settings.eval_episodes < 1:
        raise ValueError(f"eval_episodes must be >= 1, got {settings.eval_episodes}")
    every = settings.checkpoint_every
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"checkpoint_every must be an integer >= 1 (env steps), got {every!r}")
    if settings.resume:
        if not checkpoint.exists():
            raise ValueError(f"nothing to resume: {out} holds no run ({checkpoint.name} is missing)")
        payload = load_checkpoint(checkpoint)
        if settings.encoder == "auto":  # the run's own
            settings = dataclasses.replace(settings, encoder=_saved_encoder(payload))
        mine = {k: v for k, v in _loop_fields(settings).items() if k not in _RESUMABLE_ELSEWHERE}
        saved = {k: v for k, v in payload["settings"].items() if k in mine}
        if saved != mine:
            differ = ", ".join(
                f"{k!r} (the run's {saved[k]!r}, given {mine[k]!r})" if k in saved
                else f"{k!r} (not in the run's checkpoint, given {mine[k]!r})"
                for k in sorted(k for k in mine if k not in saved or saved[k] != mine[k])
            )  # fmt: skip
            raise ValueError(f"--resume with settings that differ from the run in {out}: {differ}")
    elif checkpoint.exists():  # a directory without a checkpoint is a run that never got going
        raise ValueError(f"{out} already holds a run; pass --resume to continue it or choose another --out")
    elif out.exists() and any(out.iterdir()) and not (out / "settings.json").exists():
        raise ValueError(f"{out} is a non-empty directory that is not an rla train run; choose another --out")
    # a new run records the encoder "auto" resolves to
    settings = dataclasses.replace(settings, encoder=resolve_encoder(settings.encoder, settings.env))
    validate_settings(LoopSettings(**_loop_fields(settings)))  # before anything is written
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _train_in(out, settings, payload if settings.resume else None)
    except KeyboardInterrupt as error:  # Ctrl-C: the last periodic checkpoint is the state kept
        raise _interrupted(out, checkpoint) from error


def _train_in(out: Path, settings: TrainSettings, payload: dict[str, Any] | None) -> dict[str, Any]:
    """Build (or restore) the run in ``out``, train it to its step target, checkpoint, evaluate."""
    checkpoint = out / "checkpoint.pt"
    torch.set_num_threads(1)
    model, loop = build_loop(LoopSettings(**_loop_fields(settings)))
    if payload is not None:
        _restore(payload, model, loop)
        _record_resume(out / "settings.json", settings, int(payload["num_timesteps"]))
    else:
        write_text_atomic(out / "settings.json", json.dumps(dataclasses.asdict(settings), indent=2) + "\n")
    # a resumed run keeps its log up to the checkpoint: rows past it were trained again
    keep = int(payload["num_timesteps"]) if payload is not None else None
    outputs: list[Any] = [ResumableCSVOutputFormat(str(out / "progress.csv"), keep_until=keep)]
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        pass
    else:
        outputs.append(make_output_format("tensorboard", str(out)))
    model.set_logger(Logger(str(out), outputs))
    saver = CheckpointCallback(checkpoint, settings, loop, settings.checkpoint_every, settings.steps)
    remaining = settings.steps - model.num_timesteps
    if remaining > 0:
        votes = MODE_FLAGS[settings.mode].votes != "none"  # lambda weighs the votes: none, no lambda
        weight = f"lambda {settings.lam:g}, " if votes else ""
        print(
            f"training {settings.env} ({settings.algo}, mode {settings.mode}, {weight}"
            f"encoder {settings.encoder}) "
            f"from step {model.num_timesteps} to {settings.steps} in {out}",
            flush=True,
        )
        model.learn(remaining, callback=CallbackList([loop, saver]), reset_num_timesteps=False)
    else:
        print(f"the run in {out} has trained {model.num_timesteps} steps of its {settings.steps}: "
              "nothing to train (a larger --steps continues it)")  # fmt: skip
    save_checkpoint(checkpoint, settings, model, loop)
    results = {"steps": int(model.num_timesteps), "evaluation": evaluate_both(model, settings)}
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    try:  # PNG curves when matplotlib (the "plots" extra) is installed
        from agents.plots import plot_run

        plot_run(out)
    except ImportError:
        pass
    return {**results, "out": str(out)}


def policy_agent(model: Any, masked: bool, deterministic: bool = True) -> Any:
    """The greedy (or, ``deterministic=False``, the stochastic) policy of an SB3 model as an
    ``rla_gym.evaluation`` agent."""

    def agent(obs: Any, info: dict[str, Any], rng: np.random.Generator) -> int:
        if masked:  # MaskablePPO acts on admissible commands only when it is given the mask
            mask = info["action_mask"] == 1
            return int(model.predict(obs, deterministic=deterministic, action_masks=mask)[0])
        return int(model.predict(obs, deterministic=deterministic)[0])

    return agent


def evaluate_policy(
    model: Any,
    settings: TrainSettings,
    levels: tuple[float, ...] = EVAL_LEVELS,
    deterministic: bool = True,
    *,
    batched: bool = True,
) -> list[dict[str, float]]:
    """Held-out success at fixed difficulties: greedy, or stochastic with ``deterministic=False``.

    ``batched`` (the default) runs every held-out task of every level at once on the suite's
    vector env (:func:`agents.evaluation.evaluate_batched`); ``False`` runs one episode at a time.
    Both play the same tasks; the greedy policy's results are identical.
    """
    masked = settings.algo.startswith("maskable")
    if batched or settings.history:  # a history policy is evaluated in batch, keeping its history
        from agents.evaluation import evaluate_batched, loop_batch_agent

        agent_batch = loop_batch_agent(model, settings, deterministic)
        rows = evaluate_batched(settings.env, agent_batch, levels, settings.eval_episodes)
        return [{k: r[k] for k in ("difficulty", "success", "mean_length")} for r in rows]
    env = gym.make(settings.env)
    agent = policy_agent(model, masked, deterministic)
    rows = []
    for level in levels:
        result = evaluate(env, agent, level, heldout_seeds(settings.eval_episodes))
        rows.append({"difficulty": level, "success": result.success_rate, "mean_length": result.mean_length})
    return rows


def load_run(run: str) -> tuple[Any, TrainSettings]:
    """The trained policy and settings of a run directory."""
    checkpoint = Path(run) / "checkpoint.pt"
    if not checkpoint.exists():
        raise ValueError(f"no run in {run}: {checkpoint.name} is missing (give a directory rla train wrote)")
    payload = load_checkpoint(checkpoint)
    known = {f.name for f in dataclasses.fields(TrainSettings)}
    saved = {**payload["settings"], "encoder": _saved_encoder(payload)}
    settings = TrainSettings(**{k: v for k, v in saved.items() if k in known})
    settings.device = "cpu"  # evaluation needs no GPU, and the run may come from a machine with one
    model, _ = build_loop(LoopSettings(**_loop_fields(settings)))
    model.policy.load_state_dict(payload["policy"])
    model.num_timesteps = payload["num_timesteps"]
    return model, settings


def evaluate_both(
    model: Any, settings: TrainSettings, levels: tuple[float, ...] = EVAL_LEVELS
) -> list[dict[str, float]]:
    """Held-out success of the stochastic policy (``success``, the field's figure) and of the
    greedy one (``success_greedy``) at fixed difficulties, on the same held-out tasks."""
    stochastic = evaluate_policy(model, settings, levels, deterministic=False)
    greedy = evaluate_policy(model, settings, levels, deterministic=True)
    return [
        {**row, "success_greedy": other["success"], "mean_length_greedy": other["mean_length"]}
        for row, other in zip(stochastic, greedy, strict=True)
    ]
