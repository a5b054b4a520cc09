"""The tables of docs/results.md for one study folder, as markdown, from its run files.

    python benchmarks/study/page_tables.py benchmarks/results/study/reason-grpo [--levels 0.6]
        [--vs "Policy:Outcome-only" "+ Env (uniform):+ Env (fixed)" ...] [--with VARIANT_DIR ...]

Prints, from ``summary.json`` (``python -m agents.bench_report DIR`` writes it), ``evals.csv``,
``references.json`` and the runs: the ablation rows (score, in-domain success, d50, area under
the learning curve), the pre-declared comparisons, the strategies under the full loop, the final
held-out success per level (mean over seeds, levels up to ``--levels``, with the random policy),
and the paired differences named with ``--vs`` (default: each learned row and the best strategy
against Outcome-only). Those are not pre-declared: their p is uncorrected, for reading the
tables, not for verdicts. ``--with`` adds the runs of other folders of the same env (a variant
run beside the study, e.g. ``benchmarks/results/variants/gui-grpo-potential``) to those paired
differences, each run normalised with its own folder's references.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from agents.bench_records import ROW_ORDER, row_label
from agents.bench_report import _cell, _normalised_auc, _number, load_runs
from agents.bench_stats import compare, row_pairs


def ablation(summary: dict[str, Any], env: str) -> str:
    lines = [
        "| row | score: normalised area, IQM [95% CI] | in-domain success (levels 0-0.5), IQM [95% CI] "
        "| d50 (mean) | area under the learning curve (mean) |",
        "|---|---|---|---:|---:|",
    ]
    for label in ROW_ORDER:
        row = summary["ablation"].get(label)
        if row is None:
            continue
        cell = summary["per_env"].get(f"{env} / {label}", {})
        lines.append(
            f"| {label} | {_cell(row['normalised'])} | {_cell(row['in_domain'])} | "
            f"{_number(cell.get('d50', math.nan))} | {_number(cell.get('auc_learning', math.nan))} |"
        )
    return "\n".join(lines)


def declared(summary: dict[str, Any]) -> str:
    lines = [
        "| comparison | pairs | mean difference [95% CI] | P(improvement) | Holm p | resolved |",
        "|---|---:|---|---:|---:|---|",
    ]
    for c in summary["comparisons"]:
        lines.append(
            f"| {c['comparison']} | {c['pairs']} | {c['difference']:.2f} [{c['low']:.2f}, {c['high']:.2f}] | "
            f"{c['p_improvement']:.2f} | {c['p_holm']:.3f} | {'yes' if c['resolved'] else 'no'} |"
        )
    return "\n".join(lines)


def strategies(summary: dict[str, Any], env: str) -> str:
    lines = [
        "| strategy | score: normalised area, IQM [95% CI] | in-domain success, IQM [95% CI] "
        "| d50 (mean) | area under the learning curve (mean) | final training difficulty "
        "| training success (last 10 rollouts) |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    rows = sorted(summary["strategies"].items(), key=lambda kv: -np.nan_to_num(kv[1]["normalised"][0]))
    for name, row in rows:
        label = "+ Env" if name == "task-pool" else f"+ Env ({name})"
        cell = summary["per_env"].get(f"{env} / {label}", {})
        lines.append(
            f"| {name} | {_cell(row['normalised'])} | {_cell(row['in_domain'])} "
            f"| {_number(cell.get('d50', math.nan))} | {_number(cell.get('auc_learning', math.nan))} "
            f"| {row['final_train_difficulty']:.2f} "
            f"| {row['train_success']:.2f} |"
        )
    return "\n".join(lines)


def per_level(folder: Path, env: str, top: float) -> str:
    """Mean final success per (row, level): each run's last evaluation in evals.csv."""
    with (folder / "evals.csv").open() as f:
        records = [r for r in csv.DictReader(f) if r["env"] == env]
    last: dict[tuple[str, str], int] = {}
    for r in records:
        key = (r["row"], r["seed"])
        last[key] = max(last.get(key, -1), int(r["step"]))
    first: dict[str, int] = {}
    for r in records:
        first[r["seed"]] = min(first.get(r["seed"], 1 << 62), int(r["step"]))
    cells: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    before: dict[tuple[str, float], float] = {}
    for r in records:
        level = float(r["level"])
        if level > top + 1e-9:
            continue
        if int(r["step"]) == last[r["row"], r["seed"]]:
            cells[r["row"]][level].append(float(r["success"]))
        if int(r["step"]) == first[r["seed"]]:
            before[r["seed"], level] = float(r["success"])  # every row of a seed starts alike
    for (_, level), value in before.items():
        cells["Before training"][level].append(value)
    levels = sorted({lv for row in cells.values() for lv in row})
    reference = json.loads((folder / "references.json").read_text()).get(env, {})
    head = "| row | " + " | ".join(f"{lv:.1f}" for lv in levels) + " |"
    lines = [head, "|---|" + "---:|" * len(levels)]
    if "random" in reference:
        random = {float(k): v for k, v in reference["random"].items()}
        lines.append("| random policy | " + " | ".join(f"{random[lv]:.2f}" for lv in levels) + " |")
    order = [*(r for r in ROW_ORDER if r in cells), *sorted(r for r in cells if r not in ROW_ORDER)]
    for row in order:
        lines.append(f"| {row} | " + " | ".join(f"{np.mean(cells[row][lv]):.2f}" for lv in levels) + " |")
    return "\n".join(lines)


def paired(folders: list[Path], env: str, pairs: list[tuple[str, str]]) -> str:
    """Paired differences of the score, one comparison at a time, over the runs of ``folders``
    (rows of the same name from several folders are merged, seed by seed)."""
    rows: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
    for folder in folders:
        runs = load_runs(folder, sorted(p.stem for p in (folder / "runs").glob("*.json")))
        others = sorted({run["spec"]["env"] for run in runs} - {env})
        if others:
            raise ValueError(f"{folder} holds runs of {others}; the paired table is for {env} alone")
        references = json.loads((folder / "references.json").read_text())
        scores = row_pairs(runs, row_label, lambda run, refs=references: _normalised_auc(run, refs))
        for label, by_seed in scores.items():
            rows[label].update(by_seed)
    lines = ["| comparison | pairs | mean difference [95% CI] | uncorrected p |", "|---|---:|---|---:|"]
    for x, y in pairs:
        for result in compare(rows, [(x, y)]):  # one at a time: no family, the p stays uncorrected
            lines.append(
                f"| {result['comparison']} | {result['pairs']} | {result['difference']:.3f} "
                f"[{result['low']:.3f}, {result['high']:.3f}] | {result['p']:.3f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a study folder (rla bench --out)")
    parser.add_argument("--levels", type=float, default=0.6, help="highest level in the per-level table")
    parser.add_argument("--vs", nargs="*", default=None, help='paired differences "X:Y" (not pre-declared)')
    parser.add_argument(
        "--with", dest="extra", nargs="*", type=Path, default=[], help="folders of the same env, for --vs"
    )
    args = parser.parse_args(argv)
    summary = json.loads((args.folder / "summary.json").read_text())
    envs = sorted({key.split(" / ")[0] for key in summary["per_env"]})
    if len(envs) != 1:
        raise ValueError(f"{args.folder} holds {len(envs)} envs ({envs}); the page's tables are per env")
    env = envs[0]
    if args.vs is None:
        plain = ("Before training", "Outcome-only", "+ Env")
        learned = [r for r in ROW_ORDER if r in summary["ablation"] and r not in plain]
        args.vs = [f"{r}:Outcome-only" for r in learned]
        others = [n for n in summary["strategies"] if n != "task-pool"]
        if others:
            best = max(others, key=lambda n: np.nan_to_num(summary["strategies"][n]["normalised"][0]))
            args.vs += [f"+ Env ({best}):Outcome-only", f"+ Env ({best}):+ Env (fixed)"]
    pairs = []
    for text in args.vs:
        if text.count(":") != 1:
            raise ValueError(f'--vs takes "X:Y", got {text!r}')
        x, y = text.split(":")
        pairs.append((x, y))
    sections = [
        ("Ablation", ablation(summary, env)),
        ("Pre-declared comparisons", declared(summary)),
        ("Strategies under the full loop", strategies(summary, env) if summary["strategies"] else "(none)"),
        ("Final held-out success per level, mean over seeds", per_level(args.folder, env, args.levels)),
        ("Not pre-declared (uncorrected)", paired([args.folder, *args.extra], env, pairs)),
    ]
    print(f"# {env}: {args.folder}\n")
    for title, body in sections:
        print(f"## {title}\n\n{body}\n")


if __name__ == "__main__":
    main()
