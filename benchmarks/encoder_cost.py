"""What a training minibatch costs with each token encoder, per env.

    python benchmarks/encoder_cost.py [--batch 256] [--repeats 5] [--out FILE.json]

For each env and encoder: a ``TokenFeaturesExtractor`` and SB3's default 64-64 policy and value
heads (as ``MaskableTokenPolicy`` builds them), then forward, backward and an Adam step on a
minibatch of random token ids, one torch thread, CPU. Each figure is the median over
``--repeats`` blocks of 20 minibatches, the encoders taking turns within each block so that
the machine's load falls on all of them alike.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import gymnasium as gym
import torch
from torch import nn

import rla_gym
from agents.policies import ENCODERS, TokenFeaturesExtractor

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ("flatten", "lookup-lite", "lookup", "relational", "flatten-small")


def model(space: gym.spaces.Dict, actions: int, encoder: str) -> nn.Module:
    """The extractor and two 64-64 heads (policy logits and value), as one module."""
    extractor = TokenFeaturesExtractor(space, encoder=encoder)
    width = extractor.features_dim

    def head(out: int) -> nn.Sequential:
        layers = (nn.Linear(width, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out))
        return nn.Sequential(*layers)

    return nn.ModuleDict({"extractor": extractor, "pi": head(actions), "vf": head(1)})


def minibatch_ms(net: nn.Module, tokens: torch.Tensor, optimizer: torch.optim.Optimizer, count: int) -> float:
    """Milliseconds per minibatch over ``count`` forward-backward-Adam steps."""
    start = time.perf_counter()
    for _ in range(count):
        features = net["extractor"]({"tokens": tokens})
        loss = net["pi"](features).logsumexp(dim=1).mean() + net["vf"](features).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return (time.perf_counter() - start) / count * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "encoder_cost.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    assert set(MEASURED) <= set(ENCODERS)
    rows = []
    for env_id in rla_gym.ENV_IDS:
        env = gym.make(env_id)
        space, actions = env.observation_space, int(env.action_space.n)
        length, vocab = space["tokens"].shape[0], int(space["tokens"].high.max()) + 1
        tokens = torch.randint(0, vocab, (args.batch, length)).float()
        nets = {encoder: model(space, actions, encoder) for encoder in MEASURED}
        optimizers = {encoder: torch.optim.Adam(net.parameters()) for encoder, net in nets.items()}
        for encoder in MEASURED:  # warm up
            minibatch_ms(nets[encoder], tokens, optimizers[encoder], 3)
        times: dict[str, list[float]] = {encoder: [] for encoder in MEASURED}
        for _ in range(args.repeats):
            for encoder in MEASURED:
                times[encoder].append(minibatch_ms(nets[encoder], tokens, optimizers[encoder], 20))
        flatten = statistics.median(times["flatten"])
        for encoder in MEASURED:
            ms = statistics.median(times[encoder])
            size = sum(p.numel() for p in nets[encoder].parameters())
            row = {
                "env": env_id, "tokens": length, "encoder": encoder, "ms_per_minibatch": round(ms, 2),
                "x_flatten": round(ms / flatten, 2), "parameters": size,
            }  # fmt: skip
            rows.append(row)
            print(row, flush=True)
    meta = {
        "command": "python benchmarks/encoder_cost.py"
        + (f" --batch {args.batch}" if args.batch != 256 else "")
        + (f" --repeats {args.repeats}" if args.repeats != 5 else ""),
        "machine": f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
        "1 torch thread",
        "date": time.strftime("%Y-%m-%d"),
        "batch": args.batch,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
