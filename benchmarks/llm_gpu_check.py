"""The LLM side on CUDA: judge calls and a few GRPO steps with a random-init model.

    python benchmarks/llm_gpu_check.py [--judge-episodes 8] [--grpo-steps 3] [--vllm]
    python benchmarks/llm_gpu_check.py --device cpu --hidden 32   # the script itself, on a CPU

It first probes what this machine's Python has (torch and CUDA, transformers, trl, vllm,
accelerate, datasets), since the GPU machine cannot install packages, and prints the probe.
Without a CUDA device, or without transformers, it says why and exits 0 (nothing to check).
With them it builds the offline tiny tokenizer (``agents.llm.tiny``) and a random Qwen2 of
``--hidden`` width on the GPU, then

1. judge: :class:`agents.llm.judge.LLMJudge` (m = 3 votes at temperature 0.8) through
   :class:`agents.llm.backends.TransformersBackend` on the steps of oracle episodes; checks the
   votes' shape and the model's placement, and times it (a random model writes few usable
   boxes: the unparsable share is reported, not judged);
2. GRPO (when trl imports): ``RLAnythingGRPOTrainer`` (``agents.llm.grpo_trainer``) trains
   ``--grpo-steps`` steps on TextNav tasks with that judge; checks the step count and placement;
3. vLLM (``--vllm``, when vllm imports): the same judge calls through ``vllm.LLM`` on the saved
   model.

Results go to ``benchmarks/results/llm_gpu_check.json``; the exit status is 1 if a part that
ran failed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PACKAGES = ("torch", "transformers", "trl", "vllm", "accelerate", "datasets")


def probe() -> dict[str, Any]:
    """Versions of the packages this check can use (None: not importable) and the CUDA device."""
    found: dict[str, Any] = {}
    for name in PACKAGES:
        try:
            found[name] = getattr(importlib.import_module(name), "__version__", "?")
        except Exception as error:  # a broken install raises more than ImportError
            found[name] = None
            found[f"{name}_error"] = f"{type(error).__name__}: {error}"[:200]
    found["cuda"] = None
    if found["torch"]:
        import torch

        if torch.cuda.is_available():
            found["cuda"] = torch.cuda.get_device_name(0)
    return found


def oracle_episodes(count: int, difficulty: float = 0.5) -> list[Any]:
    """TextNav episodes played by the oracle, for the judge to read."""
    import numpy as np

    from rla_gym.llm import TextEpisode

    episodes = []
    for seed in range(count):
        episode = TextEpisode("RLA-TextNav-v0", difficulty=difficulty, seed=seed)
        episode.reset()
        while not episode.done:
            best = int(np.flatnonzero(episode.info["oracle_mask"])[0])
            episode.step(f"The oracle says so. \\boxed{{{episode.admissible.index(best) + 1}}}")
        episodes.append(episode)
    return episodes


def judge_part(backend: Any, episodes: Sequence[Any], max_new_tokens: int) -> dict[str, Any]:
    """LLMJudge statistics on ``episodes``, timed; raises if the votes are malformed."""
    from agents.llm.judge import LLMJudge

    judge = LLMJudge(backend, m=3, temperature=0.8, max_new_tokens=max_new_tokens)
    start = time.perf_counter()
    stats = judge.statistics(episodes, [1] * len(episodes))
    seconds = time.perf_counter() - start
    steps = sum(len(e.steps) for e in episodes)
    votes = judge.votes(episodes[0].steps)
    if votes.shape != (len(episodes[0].steps), 3) or not set(votes.ravel()) <= {-1, 0, 1}:
        raise AssertionError(f"malformed votes: shape {votes.shape}, values {set(votes.ravel())}")
    if judge.votes_cast != 3 * (steps + len(episodes[0].steps)):
        raise AssertionError(f"{judge.votes_cast} votes cast for {steps} + {len(episodes[0].steps)} steps")
    return {
        "steps": steps, "votes": 3 * steps, "seconds": seconds, "votes_per_second": 3 * steps / seconds,
        "unparsable_share": stats["unparsable_share"], "p_plus": stats["p_plus"],
    }  # fmt: skip


def grpo_part(
    model: Any, tokenizer: Any, judge_backend: Any, steps: int, out: str, device: str
) -> dict[str, Any]:
    """A few RLAnythingGRPOTrainer steps on CUDA; imported here, so a missing trl only skips this part."""
    import torch
    from trl import GRPOConfig

    from agents.llm.grpo_trainer import RLAnythingGRPOTrainer
    from agents.llm.judge import LLMJudge
    from agents.llm.trl_env import CurriculumTasks
    from rla_gym.curricula import FixedCurriculum

    group = 4
    args = GRPOConfig(
        output_dir=out, num_generations=group, per_device_train_batch_size=group, max_steps=steps,
        max_completion_length=64, max_tool_calling_iterations=4, learning_rate=1e-3, report_to="none",
        logging_steps=1, save_strategy="no", use_cpu=device == "cpu",
    )  # fmt: skip
    judge = LLMJudge(judge_backend, m=3, max_new_tokens=32)
    trainer = RLAnythingGRPOTrainer(
        model=model, processing_class=tokenizer, args=args, judge=judge.votes,
        tasks=CurriculumTasks(FixedCurriculum("RLA-TextNav-v0", difficulty=0.0), group_size=group),
    )  # fmt: skip
    start = time.perf_counter()
    trainer.train()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    off = [name for name, p in model.named_parameters() if p.device.type != device]
    if trainer.state.global_step != steps or off:
        raise AssertionError(
            f"global_step {trainer.state.global_step} of {steps}; parameters off {device}: {off[:3]}"
        )
    logged = [row for row in trainer.state.log_history if "loss" in row]
    return {
        "steps": steps, "seconds": seconds, "seconds_per_step": seconds / steps,
        "success": [row.get("rlanything/success") for row in logged], "judge_votes": judge.votes_cast,
        "judge_unparsable_share": judge.unparsable_share,
    }  # fmt: skip


class VLLMBackend:
    """``vllm.LLM`` behind the Backend protocol (chat messages rendered by its tokenizer)."""

    def __init__(self, path: str) -> None:
        import vllm

        self.vllm = vllm
        self.llm = vllm.LLM(model=path, gpu_memory_utilization=0.3, max_model_len=4096, enforce_eager=True)
        self.tokenizer = self.llm.get_tokenizer()

    def generate(
        self, prompts: Sequence[Any], n: int = 1, temperature: float = 1.0, max_new_tokens: int = 256
    ) -> list[list[str]]:
        texts = [
            p
            if isinstance(p, str)
            else self.tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False)
            for p in prompts
        ]
        params = self.vllm.SamplingParams(n=n, temperature=temperature, top_p=0.95, max_tokens=max_new_tokens)
        return [[o.text for o in out.outputs] for out in self.llm.generate(texts, params)]


def vllm_judge(model: Any, tokenizer: Any, tmp: str, args: argparse.Namespace) -> dict[str, Any]:
    """The judge part through ``vllm.LLM`` on the saved model."""
    path = str(Path(tmp) / "model")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return judge_part(VLLMBackend(path), oracle_episodes(args.judge_episodes), args.max_new_tokens)


def _plain(value: Any) -> Any:
    """``value`` with NaN as None, so the results file is strict JSON."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return None if isinstance(value, float) and value != value else value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--judge-episodes", type=int, default=8)
    parser.add_argument("--grpo-steps", type=int, default=3)
    parser.add_argument(
        "--hidden", type=int, default=256, help="width of the random Qwen2 (head dim = width / 4)"
    )
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument(
        "--device", default="cuda", choices=("cuda", "cpu"), help="cpu: check the script itself"
    )
    parser.add_argument("--vllm", action="store_true", help="also judge through vllm.LLM when vllm imports")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "llm_gpu_check.json"))
    args = parser.parse_args(argv)
    found = probe()
    print("probe:", json.dumps(found))
    if args.device == "cuda" and not found["cuda"]:
        print("skipped: no CUDA device on this machine; the LLM GPU check runs on the GPU machine.")
        return 0
    if not found["transformers"]:
        print("skipped: transformers does not import here, and this machine cannot install it.")
        return 0
    import torch

    from agents.llm.backends import TransformersBackend
    from agents.llm.tiny import tiny_model, tiny_tokenizer

    torch.manual_seed(0)
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, hidden_size=args.hidden, layers=args.layers).to(args.device).eval()
    backend = TransformersBackend(model, tokenizer)
    report: dict[str, Any] = {"probe": found, "parameters": model.num_parameters(), "parts": {}}
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        parts: list[tuple[str, Any]] = [
            (
                "judge_transformers",
                lambda: judge_part(backend, oracle_episodes(args.judge_episodes), args.max_new_tokens),
            )
        ]
        if found["trl"]:
            parts.append(
                (
                    "grpo",
                    lambda: grpo_part(model.train(), tokenizer, backend, args.grpo_steps, tmp, args.device),
                )
            )
        else:
            report["parts"]["grpo"] = {"skipped": "trl does not import here"}
        if args.vllm and found["vllm"]:
            parts.append(("judge_vllm", lambda: vllm_judge(model, tokenizer, tmp, args)))
        elif args.vllm:
            report["parts"]["judge_vllm"] = {"skipped": "vllm does not import here"}
        for name, run in parts:
            try:
                report["parts"][name] = _plain(run())
            except Exception as error:  # report every part, then fail
                failed = True
                report["parts"][name] = {"error": f"{type(error).__name__}: {error}"[:500]}
                traceback.print_exc()
            print(f"{name}: {json.dumps(report['parts'][name])}")
    report["device"] = found["cuda"] if args.device == "cuda" else "cpu"
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"results: {args.out}" + ("; a part FAILED" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
