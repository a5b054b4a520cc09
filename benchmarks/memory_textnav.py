"""Memory at d = 0.5 TextNav: Outcome-only on the fast path, memoryless against a history.

From d = 0.5 RLA-TextNav-v0 names neither the route nor where an exit leads. This trains
Outcome-only (mode ``outcome``, fixed difficulty 0.5) on the fast path
(``LoopSettings(preset="fast")``: PPO on 128 batched envs) with the policy seeing

- ``h0``: the current observation only (today's policy);
- ``hK``: the last K observations and actions (``LoopSettings(history=K)``, ``agents.history``);
- ``lstm``: sb3-contrib RecurrentPPO (an LSTM of 64 units after the same token extractor, the
  fast preset's rollout and update sizes; it has no action masking),

and reports the held-out success of the stochastic policy (and the greedy one) on the study's
200 held-out d = 0.5 tasks every ``--eval-every`` steps, with the training steps/s (wall time
of ``learn`` only, one torch thread). Runs are added to the results JSON, keyed by their
configuration and seed, so screens and long runs can be run separately::

    python benchmarks/memory_textnav.py --configs h0 h1 h4 lstm --steps 200000 --seeds 0
    python benchmarks/memory_textnav.py --configs h0 h4 --steps 1000000 --seeds 0 1 2 --eval-every 200000

``--algo maskable-ppo`` runs the same with MaskablePPO (history configurations only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.evaluation import evaluate_batched, policy_batch_agent
from agents.history import EpisodeStarts, history_batch_agent
from agents.loop import LoopSettings, apply_preset, build_loop
from agents.loop_runtime import GAMMA, IntegratedRewardVecEnv, RLAnythingCallback

ENV = "RLA-TextNav-v0"
LEVEL = 0.5
OUT = Path(__file__).parent / "results" / "memory_textnav.json"


def _settings(config: str, algo: str, encoder: str, seed: int) -> LoopSettings:
    history = 0 if config == "lstm" else int(config[1:])
    return apply_preset(
        LoopSettings(
            env=ENV, preset="fast", algo=algo, mode="outcome", difficulty=LEVEL, history=history,
            encoder=encoder, seed=seed, device="cpu",
        ),
        given={"algo", "encoder", "history"},  # these win over the preset, even at their defaults
    )  # fmt: skip


def _recurrent(settings: LoopSettings) -> tuple[Any, RLAnythingCallback]:
    """RecurrentPPO on the loop's Outcome-only stack (batched envs, outcome rewards, fixed level)."""
    from sb3_contrib import RecurrentPPO

    from agents.curriculum import CurriculumVecEnv
    from agents.policies import TokenFeaturesExtractor
    from agents.vec_env import BatchedVecEnv
    from rla_gym.curricula import FixedCurriculum

    venv = BatchedVecEnv(settings.env, settings.n_envs, seed=settings.seed)
    reward_env = IntegratedRewardVecEnv(venv, None, mode="outcome", deferred=True, seed=settings.seed)
    curriculum = FixedCurriculum(settings.env, settings.difficulty, seed=settings.seed)
    top = CurriculumVecEnv(reward_env, curriculum)
    model = RecurrentPPO(
        "MultiInputLstmPolicy", top, n_steps=settings.n_steps, batch_size=settings.batch_size,
        n_epochs=settings.n_epochs, learning_rate=settings.learning_rate, gamma=GAMMA, seed=settings.seed,
        device="cpu", policy_kwargs={
            "features_extractor_class": TokenFeaturesExtractor,
            "features_extractor_kwargs": {"encoder": settings.encoder}, "lstm_hidden_size": 64,
        },
    )  # fmt: skip
    return model, RLAnythingCallback(reward_env, None, curriculum, curriculum_env=top)


def _recurrent_agent(model: Any, deterministic: bool) -> Any:
    starts_of = EpisodeStarts()
    state: dict[str, Any] = {"lstm": None}

    def act(obs: Any, info: dict[str, Any]) -> np.ndarray:
        starts, _ = starts_of(info, len(obs["tokens"]))
        actions, state["lstm"] = model.predict(
            obs, state=state["lstm"], episode_start=starts, deterministic=deterministic
        )
        return np.asarray(actions)

    return act


def _evaluate(model: Any, config: str, masked: bool, episodes: int) -> dict[str, float]:
    scores = {}
    for name, deterministic in (("success", False), ("success_greedy", True)):
        if config == "lstm":
            agent = _recurrent_agent(model, deterministic)
        elif config == "h0":
            agent = policy_batch_agent(model, masked, deterministic)
        else:
            agent = history_batch_agent(model, int(config[1:]), masked, deterministic)
        scores[name] = evaluate_batched(ENV, agent, (LEVEL,), episodes)[0]["success"]
    return scores


def run(config: str, algo: str, encoder: str, seed: int, steps: int, every: int, episodes: int) -> dict:
    """Train one configuration, evaluating every ``every`` steps; the run's record."""
    torch.set_num_threads(1)
    settings = _settings(config, algo, encoder, seed)
    model, callback = _recurrent(settings) if config == "lstm" else build_loop(settings)
    curve, wall = [], 0.0
    while model.num_timesteps < steps:
        start = time.perf_counter()
        model.learn(min(every, steps - model.num_timesteps), callback=callback, reset_num_timesteps=False)
        wall += time.perf_counter() - start
        scores = _evaluate(model, config, algo.startswith("maskable"), episodes)
        train = [row["loop/success"] for row in callback.history[-20:]]
        curve.append({"steps": int(model.num_timesteps), **scores, "train_success": float(np.mean(train))})
        print(config, algo, encoder, seed, curve[-1], f"{model.num_timesteps / wall:.0f} steps/s", flush=True)
    return {
        "config": config, "algo": "recurrent-ppo" if config == "lstm" else algo,
        "encoder": settings.encoder,  # what the preset left: it may change the default encoder
        "seed": seed, "steps": int(model.num_timesteps), "steps_per_s": model.num_timesteps / wall,
        "success": curve[-1]["success"], "success_greedy": curve[-1]["success_greedy"], "curve": curve,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", nargs="+", default=["h0", "h1", "h4", "lstm"])
    parser.add_argument("--algo", default="ppo", choices=["ppo", "maskable-ppo"])
    parser.add_argument("--encoder", default="flatten")
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--eval-every", type=int, default=50_000)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    for seed in args.seeds:
        for config in args.configs:
            record = run(config, args.algo, args.encoder, seed, args.steps, args.eval_every, args.episodes)
            _save(args, record)


def _save(args: argparse.Namespace, record: dict) -> None:
    """Add ``record`` to the results file, read again now (other runs may have written to it)."""
    results = json.loads(args.out.read_text()) if args.out.exists() else {"runs": []}
    results["machine"] = {
        "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(), "torch_threads": 1, "note": "2 cores shared with other jobs: steps/s vary",
    }  # fmt: skip
    results["protocol"] = {
        "env": ENV, "difficulty": LEVEL, "mode": "outcome", "preset": "fast",
        "evaluation": f"{args.episodes} held-out tasks at d = {LEVEL} (agents.evaluation.evaluate_batched)",
    }  # fmt: skip
    key = [(r["config"], r["algo"], r["encoder"], r["seed"], r["steps"]) for r in results["runs"]]
    mine = (record["config"], record["algo"], record["encoder"], record["seed"], record["steps"])
    results["runs"] = [r for r, k in zip(results["runs"], key, strict=True) if k != mine] + [record]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
