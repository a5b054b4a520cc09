"""Held-out success of sb3-contrib MaskablePPO with MaskableTokenPolicy on RLA-TextNav-v0 (or ``--env``).

    python benchmarks/maskable_textnav.py --difficulty 0.3 --seed 0 --steps 150000 [--encoder attention]
    python benchmarks/maskable_textnav.py --env RLA-GUI-v0 --difficulty 0.2 --eval-every 25600

4 DummyVecEnv envs (``--n-envs``), n_steps 256, batch 256, features 128 and sb3's 64-64 heads
(``--width`` sets both), other settings sb3-contrib's defaults, one torch thread; every 10k steps
(``--eval-every``) the greedy masked policy and the stochastic one are evaluated on 200 held-out
tasks. Each curve entry is (steps, greedy success, seconds, stochastic success): seconds of
training alone. Runs before the stochastic evaluation have the first three, their seconds
counting the evaluations.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env

import rla_gym
from agents.curriculum import CurriculumVecEnv
from agents.policies import ENCODERS, MaskableTokenPolicy
from rla_gym.curricula import UniformCurriculum
from rla_gym.evaluation import evaluate, heldout_seeds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", choices=rla_gym.ENV_IDS, default="RLA-TextNav-v0")
    parser.add_argument("--difficulty", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=150_000)
    parser.add_argument("--encoder", choices=ENCODERS, default="flatten")
    parser.add_argument(
        "--train-from",
        type=float,
        default=None,
        help="train on difficulties ~ U(train_from, difficulty) (UniformCurriculum) instead of one level",
    )
    parser.add_argument("--ent-coef", type=float, default=0.0)
    parser.add_argument("--n-envs", type=int, default=4)
    parser.add_argument("--width", type=int, default=None, help="features_dim and both head widths")
    parser.add_argument(
        "--separate", action="store_true", help="separate feature extractors for policy and value"
    )
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--eval-every", type=int, default=10_000, help="steps between evaluations")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--save", type=Path, default=None, help="save the trained model here (a .zip)")
    args = parser.parse_args()
    if args.eval_every < 1:
        parser.error(f"--eval-every must be >= 1, got {args.eval_every}")
    torch.set_num_threads(1)
    venv = make_vec_env(
        args.env, n_envs=args.n_envs, seed=args.seed, env_kwargs={"difficulty": args.difficulty}
    )
    if args.train_from is not None:
        curriculum = UniformCurriculum(args.env, bounds=(args.train_from, args.difficulty), seed=args.seed)
        venv = CurriculumVecEnv(venv, curriculum)
    policy_kwargs: dict = {"features_extractor_kwargs": {"encoder": args.encoder}}
    if args.width is not None:
        policy_kwargs["features_extractor_kwargs"]["features_dim"] = args.width
        policy_kwargs["net_arch"] = [args.width, args.width]
    if args.separate:
        policy_kwargs["share_features_extractor"] = False
    model = MaskablePPO(
        MaskableTokenPolicy,
        venv,
        n_steps=256,
        batch_size=256,
        ent_coef=args.ent_coef,
        learning_rate=args.lr,
        seed=args.seed,
        policy_kwargs=policy_kwargs,
    )
    env = gym.make(args.env)

    def agent(obs, info, rng) -> int:
        return int(model.predict(obs, deterministic=True, action_masks=info["action_mask"].astype(bool))[0])

    def sampled(obs, info, rng) -> int:
        return int(model.predict(obs, deterministic=False, action_masks=info["action_mask"].astype(bool))[0])

    curve, trained = [], 0.0
    while model.num_timesteps < args.steps:
        start = time.perf_counter()
        model.learn(args.eval_every, reset_num_timesteps=False)
        trained += time.perf_counter() - start
        elapsed = round(trained, 1)
        success = evaluate(env, agent, args.difficulty, heldout_seeds(200)).success_rate
        stochastic = evaluate(env, sampled, args.difficulty, heldout_seeds(200)).success_rate
        curve.append((model.num_timesteps, success, elapsed, stochastic))
        print(
            f"steps {model.num_timesteps}: success {stochastic:.3f} stochastic, {success:.3f} greedy "
            f"({elapsed} s training)",
            flush=True,
        )
    out = args.out or Path(
        f"benchmarks/results/maskable_{args.env[4:-3].lower()}_d{args.difficulty}_{args.encoder}"
        + ("" if args.train_from is None else f"_from{args.train_from}")
        + ("" if args.width is None else f"_w{args.width}")
        + ("" if args.n_envs == 4 else f"_n{args.n_envs}")
        + ("_sep" if args.separate else "")
        + ("" if args.lr == 3e-4 else f"_lr{args.lr:g}")
        + f"_s{args.seed}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.save is not None:
        model.save(args.save)
    meta = {"command": "python benchmarks/maskable_textnav.py", **{k: str(v) for k, v in vars(args).items()}}
    out.write_text(json.dumps({"meta": meta, "curve": curve}, indent=2) + "\n")


if __name__ == "__main__":
    main()
