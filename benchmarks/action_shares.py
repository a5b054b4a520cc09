"""What a study run's policy does: the share of each kind of command and how often it is optimal.

    python benchmarks/action_shares.py --config benchmarks/study/reason-ppo.toml --mode oracle
        --seed 6 [--env RLA-Reason-v0] [--strategy fixed] [--steps 300000] [--every 50000]
        [--level 0.2] [--out FILE.json]

Trains one run of a study config (``rla bench --config``'s settings for that env, mode, seed and
``--strategy``, the curriculum of mode ``env``; other modes keep the difficulty fixed) and
before training and every ``--every`` env steps runs its stochastic policy on 50 held-out tasks
at ``--level`` (and, once, uniformly random admissible commands, ``random``),
recording held-out success and, over every command the policy took there, the share of each
kind of command (an action name's first word: ``type``, ``erase``, ``write`` on Reason) split
by whether the exact oracle marks it optimal (``info["oracle_mask"]``). A run stuck in a loop
of two commands shows as two kinds at 0.5 each. ``progress_shares`` splits the same commands by
what each did to the oracle's distance to the goal (``info["progress"]``: +1 lowered it, 0 left
it, -1 raised it; the loop's votes label only +1 as a good step), and ``rise_counts`` counts how
far the -1 commands raised it. In any run that fails, the +1 commands match the distance the -1
commands added (plus the start distance); a policy that collects +1 votes instead of reaching
the goal shows as a +1 share far above ``random``'s while its success falls.
Results: ``benchmarks/results/action_shares_<env>_<config>_<mode>[_<strategy>]_s<seed>.json``.
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def measure(env_id: str, agent: Any, level: float, kind: list[str]) -> dict[str, Any]:
    """Held-out success of ``agent`` on 50 tasks at ``level``, and what its commands were and did."""
    from agents.evaluation import evaluate_batched

    counts: collections.Counter[str] = collections.Counter()
    effects: collections.Counter[int] = collections.Counter()
    rises: list[int] = []  # how far each command that raised the distance raised it
    last: list[Any] = [None]

    def counting(obs: Any, info: dict[str, Any]) -> Any:
        progress, distance = np.asarray(info["progress"]), np.asarray(info["distance"])
        if last[0] is not None:  # progress is what each row's previous command did (0 after a reset)
            effects.update(progress.tolist())
            rises.extend((distance - last[0])[progress < 0].tolist())
        last[0] = distance
        actions = agent(obs, info)
        for row, action in enumerate(np.asarray(actions).tolist()):
            optimal = bool(info["oracle_mask"][row, action])
            counts[f"{kind[action]} ({'optimal' if optimal else 'not optimal'})"] += 1
        return actions

    (row,) = evaluate_batched(env_id, counting, [level], 50)
    total = sum(counts.values())
    return {
        "success": row["success"],
        "optimal_share": sum(v for k, v in counts.items() if "(optimal)" in k) / total,
        "shares": {k: v / total for k, v in counts.most_common()},
        "progress_shares": {f"{k:+d}": v / sum(effects.values()) for k, v in sorted(effects.items())},
        "effects_counted": sum(effects.values()),
        "rise_counts": {str(k): v for k, v in sorted(collections.Counter(rises).items())},
    }


def shares(args: argparse.Namespace) -> dict[str, Any]:
    import gymnasium as gym
    import torch

    import rla_gym  # noqa: F401
    from agents.bench import BenchSettings, RunSpec, load_config, loop_settings
    from agents.evaluation import loop_batch_agent, random_batch_agent
    from agents.loop import build_loop

    torch.set_num_threads(1)
    settings = load_config(BenchSettings(config=args.config))
    loop = loop_settings(settings, RunSpec(args.env, args.mode, args.strategy, args.seed))
    model, callback = build_loop(loop)
    names = gym.make(args.env).unwrapped.action_names
    kind = [name.split()[0] for name in names]
    start = time.perf_counter()
    random = measure(args.env, random_batch_agent(0), args.level, kind)
    print(json.dumps({"random commands": random}), flush=True)
    curve = []
    while True:  # the policy before training, then every --every steps
        point = {
            "step": int(model.num_timesteps),
            **measure(args.env, loop_batch_agent(model, loop, False), args.level, kind),
        }
        curve.append(point)
        print(json.dumps(point), flush=True)
        if model.num_timesteps >= args.steps:
            break
        model.learn(args.every, callback=callback, reset_num_timesteps=False)
    return {
        "command": "python benchmarks/action_shares.py " + " ".join(args.argv),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
        "wall_seconds": round(time.perf_counter() - start),
        "random": random,
        "curve": curve,
    }


def main(argv: list[str] | None = None) -> None:
    import sys

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="a study config (benchmarks/study/*.toml)")
    parser.add_argument("--env", default="RLA-Reason-v0")
    parser.add_argument("--mode", default="oracle")
    parser.add_argument("--strategy", default="fixed", help="the curriculum (mode env)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--every", type=int, default=50_000)
    parser.add_argument("--level", type=float, default=0.2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    result = shares(args)
    out = args.out or ROOT / "benchmarks/results" / (
        f"action_shares_{args.env.split('-')[1].lower()}_{Path(args.config).stem}_{args.mode}"
        f"{'' if args.strategy == 'fixed' else '_' + args.strategy}_s{args.seed}.json"
    )
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
