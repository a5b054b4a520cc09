"""Tables, statistics and plots of an ``rla bench`` results directory.

A run's score is its final success (the stochastic policy's) averaged over the in-domain levels (those
within the training range) or over the out-of-distribution levels (harder than anything
trained on). Aggregates are the interquartile mean (IQM) over runs with a 95 % stratified
bootstrap confidence interval: runs are resampled within each env, with
``scipy.stats.bootstrap`` (Agarwal et al. 2021, the ``rliable`` recipe).
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.bench_records import ROW_ORDER, iqm_ci, row_label, score, tiers
from agents.bench_stats import ALPHA


def load_runs(out: Path, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The finished runs among ``run_ids`` (crashed or missing ones are skipped)."""
    runs = []
    for run_id in run_ids:
        path = out / "runs" / f"{run_id}.json"
        if path.exists():
            runs.append(json.loads(path.read_text()))
    return runs


def _aggregate(groups: dict[str, list[dict[str, Any]]], pick: Any) -> dict[str, Any]:
    """For each group: IQM [CI] of in-domain and OOD scores, stratified by env."""
    table = {}
    for label, runs in groups.items():
        row: dict[str, Any] = {"runs": len(runs)}
        for tier in (0, 1):
            strata: dict[str, list[float]] = defaultdict(list)
            for run in runs:
                value = score(pick(run), tiers(run)[tier])
                if not math.isnan(value):
                    strata[run["spec"]["env"]].append(value)
            name = ("in_domain", "ood")[tier]
            row[name] = iqm_ci([strata[env] for env in sorted(strata)]) if strata else (math.nan,) * 3
        table[label] = row
    return table


def _rm_columns(runs: list[dict[str, Any]], key: str) -> dict[str, float]:
    rm = [run[key] for run in runs if run.get(key)]
    return {
        f"rm_{name}": float(np.mean([r[name] for r in rm])) if rm else math.nan
        for name in ("process_accuracy", "balanced_accuracy", "outcome_accuracy", "mu")
    }


def _spec_key(run: dict[str, Any]) -> tuple[str, str, str, int]:
    spec = run["spec"]
    return spec["env"], spec["mode"], spec["strategy"], spec["seed"]


#: Training success of a run: the mean over its last this many logged rollouts.
TRAIN_WINDOW = 10


def train_success(run: dict[str, Any]) -> float:
    """Mean ``loop/success`` over the run's last :data:`TRAIN_WINDOW` logged rollouts (NaN if none)."""
    values = [h["loop/success"] for h in run["history"][-TRAIN_WINDOW:] if "loop/success" in h]
    return float(np.mean(values)) if values else math.nan


def summarize(runs: list[dict[str, Any]], references: dict[str, Any] | None = None) -> dict[str, Any]:
    """Ablation rows, strategy rows (mode env) and per-env means, as plain data.

    ``references`` (``references.json`` of the bench: per env, the random and oracle policies'
    success per level) adds each run's area under success-vs-difficulty normalised between them.
    The result does not depend on the order of ``runs``: they are sorted by spec first, so
    the bootstrap resamples the same strata in the same order.
    """
    runs = sorted(runs, key=_spec_key)
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_label[row_label(run)].append(run)
    ablation = _aggregate(
        {k: v for k, v in by_label.items() if not k.startswith("+ Env (")}, lambda r: r["evaluations"][-1]
    )
    for label, group in list(by_label.items()):
        if label in ablation:
            frozen = group[0]["spec"]["mode"] == "policy"  # its RM never trains: before == after
            ablation[label].update(_rm_columns(group, "rm_before" if frozen else "rm_after"))
    starts: list[dict[str, Any]] = []  # one run per (env, seed): its first evaluation is the seed's Before
    if runs:  # every run of a seed starts from the same policy and PRM: one per (env, seed)
        first: dict[tuple[str, int], dict[str, Any]] = {}
        for run in runs:
            first.setdefault((run["spec"]["env"], run["spec"]["seed"]), run)
        starts = list(first.values())
        ablation["Before training"] = _aggregate({"b": starts}, lambda r: r["evaluations"][0])["b"]
        with_rm = [r for r in runs if r.get("rm_before")]
        rm_first: dict[tuple[str, int], dict[str, Any]] = {}
        for run in with_rm:
            rm_first.setdefault((run["spec"]["env"], run["spec"]["seed"]), run)
        ablation["Before training"].update(_rm_columns(list(rm_first.values()), "rm_before"))
    strategies_runs = {
        r["spec"]["strategy"]: [
            x for x in runs if x["spec"]["mode"] == "env" and x["spec"]["strategy"] == r["spec"]["strategy"]
        ]
        for r in runs
        if r["spec"]["mode"] == "env"
    }
    strategies = _aggregate(strategies_runs, lambda r: r["evaluations"][-1])
    for name, group in strategies_runs.items():
        finals = [r["history"][-1].get("loop/difficulty", math.nan) for r in group if r["history"]]
        strategies[name]["final_train_difficulty"] = float(np.nanmean(finals)) if finals else math.nan
        successes = [v for v in map(train_success, group) if not math.isnan(v)]
        strategies[name]["train_success"] = float(np.mean(successes)) if successes else math.nan
    # the runs' normalised area under success vs difficulty: IQM [CI] over runs, stratified by env
    for table, groups in ((ablation, by_label), (strategies, strategies_runs)):
        for label, row in table.items():
            final = label != "Before training"
            group = groups.get(label, []) if final else starts
            strata: dict[str, list[float]] = defaultdict(list)
            for run in group:
                value = _normalised_auc(run, references, -1 if final else 0)
                if not math.isnan(value):
                    strata[run["spec"]["env"]].append(value)
            row["normalised"] = iqm_ci([strata[e] for e in sorted(strata)]) if strata else (math.nan,) * 3
    per_env: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        inside, outside = tiers(run)
        cell = per_env[f"{run['spec']['env']} / {row_label(run)}"]
        cell["in_domain"].append(score(run["evaluations"][-1], inside))
        cell["ood"].append(score(run["evaluations"][-1], outside))
        cell["train_success"].append(train_success(run))
        metrics = run.get("metrics", {}).get("success", {})  # the stochastic policy's
        cell["d50"].append(metrics.get("d50", math.nan))
        cell["auc"].append(metrics.get("auc_difficulty", math.nan))
        cell["auc_learning"].append(metrics.get("auc_learning", math.nan))
        cell["auc_normalised"].append(_normalised_auc(run, references))
    from agents.evaluation import run_metrics

    for run in starts:  # per env, the Before row: each seed's first evaluation
        inside, outside = tiers(run)
        success = run["evaluations"][0]["success"]
        levels = sorted(success, key=float)
        cell = per_env[f"{run['spec']['env']} / Before training"]
        cell["in_domain"].append(score(run["evaluations"][0], inside))
        cell["ood"].append(score(run["evaluations"][0], outside))
        if len(levels) > 1:
            before = run_metrics([float(lv) for lv in levels], [success[lv] for lv in levels])
            cell["d50"].append(before["d50"])
            cell["auc"].append(before["auc_difficulty"])
        cell["auc_normalised"].append(_normalised_auc(run, references, 0))
    for env, reference in sorted((references or {}).items()):  # the Before row's random twin
        own = [run for run in runs if run["spec"]["env"] == env]
        if own and "random" in reference:
            inside, outside = tiers({**own[0], "evaluations": [{"success": reference["random"]}]})
            cell = per_env[f"{env} / Random policy"]
            cell["in_domain"].append(score({"success": reference["random"]}, inside))
            cell["ood"].append(score({"success": reference["random"]}, outside))
            cell["auc_normalised"].append(
                _normalised_auc({**own[0], "evaluations": [{"success": reference["random"]}]}, references)
            )
    env_lambda: dict[str, set[float]] = defaultdict(set)  # mode env's lambda per env, as run
    for run in runs:
        if run["spec"]["mode"] == "env":
            env_lambda[run["spec"]["env"]].add(float(run.get("settings", {}).get("lam", 1.0)))
    return {
        **comparisons(runs, references),
        "env_lambda": {env: sorted(values) for env, values in sorted(env_lambda.items())},
        "ablation": {k: ablation[k] for k in (*ROW_ORDER, *sorted(ablation)) if k in ablation},
        "strategies": dict(sorted(strategies.items(), key=lambda kv: -np.nan_to_num(kv[1]["in_domain"][0]))),
        "per_env": {
            k: {t: float(np.nanmean(v)) if not np.all(np.isnan(v)) else math.nan for t, v in cell.items()}
            for k, cell in sorted(per_env.items())
        },
    }


def _normalised_auc(run: dict[str, Any], references: dict[str, Any] | None, evaluation: int = -1) -> float:
    """An evaluation's area under success-vs-difficulty (the final one by default), 0 at the
    random policy, 1 at the oracle; NaN without references at the run's levels."""
    from agents.evaluation import area_under, normalise

    reference = (references or {}).get(run["spec"]["env"])
    if reference is None:
        return math.nan
    success = run["evaluations"][evaluation]["success"]
    if set(success) != set(reference["random"]) or len(success) < 2:
        return math.nan  # other levels than the references'
    levels = sorted(success, key=float)
    area = {
        name: area_under([float(lv) for lv in levels], [values[lv] for lv in levels], "levels")
        for name, values in (
            ("run", success),
            ("random", reference["random"]),
            ("oracle", reference["oracle"]),
        )
    }
    return normalise(area["run"], area["random"], area["oracle"])


def comparisons(runs: list[dict[str, Any]], references: dict[str, Any] | None) -> dict[str, Any]:
    """The pre-declared paired comparisons (:mod:`agents.bench_stats`) on the runs' normalised
    area under success-vs-difficulty, and each row's performance profile over those scores."""
    from agents.bench_stats import ORDERING, PROFILE_TAUS, compare, performance_profile, row_pairs

    if not references:
        return {"score": None, "comparisons": [], "profiles": {}}
    rows = row_pairs(runs, row_label, lambda run: _normalised_auc(run, references))
    first: dict[tuple[str, int], dict[str, Any]] = {}
    for run in runs:  # every run of a seed starts from the same policy: one per (env, seed)
        first.setdefault((run["spec"]["env"], run["spec"]["seed"]), run)
    rows["Before training"] = {key: _normalised_auc(run, references, 0) for key, run in first.items()}
    strategies = sorted(label for label in rows if label.startswith("+ Env ("))
    declared = [*ORDERING, *(("+ Env", other) for other in strategies)]
    return {
        "score": "area under success vs difficulty, normalised between random (0) and oracle (1)",
        "comparisons": compare(rows, declared),
        "profiles": {
            label: performance_profile(list(pairs.values()), PROFILE_TAUS)
            for label, pairs in sorted(rows.items())
        },
    }


def _verdict(row: dict[str, Any]) -> str:
    if row["resolved"]:
        return "yes"
    if not row.get("can_resolve", True):
        return f"no: {row['pairs']} pairs cannot reach p < 0.05 after Holm"
    return "no"


def _cell(triple: Any) -> str:
    point, low, high = triple
    if math.isnan(point):
        return "-"
    return f"{point:.2f} [{low:.2f}, {high:.2f}]" if not math.isnan(low) else f"{point:.2f}"


def _number(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _p(value: float) -> str:
    """A p-value to 3 decimals, more where 3 would put it on the other side of 0.05 (0.0498 does
    not print as 0.050 beside a comparison it resolves); "-" for NaN."""
    if math.isnan(value):
        return "-"
    for digits in range(3, 17):
        text = f"{value:.{digits}f}"
        if (float(text) < ALPHA) == (value < ALPHA):
            break
    return text


def markdown(summary: dict[str, Any]) -> str:
    """The summary as markdown tables."""
    lines = [
        "## Ablation",
        "",
        "| row | in-domain success, IQM [95% CI] | OOD success | normalised area, IQM [95% CI] "
        "| RM process acc. | RM balanced acc. | RM outcome acc. | mu | runs |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for label, row in summary["ablation"].items():
        rm = [
            row.get(k, math.nan)
            for k in ("rm_process_accuracy", "rm_balanced_accuracy", "rm_outcome_accuracy", "rm_mu")
        ]
        rm_text = " | ".join("-" if math.isnan(v) else f"{v:.3f}" for v in rm)
        lines.append(
            f"| {label} | {_cell(row['in_domain'])} | {_cell(row['ood'])} | "
            f"{_cell(row.get('normalised', (math.nan,) * 3))} | {rm_text} | {row['runs']} |"
        )
    if summary["strategies"]:  # a bench of fixed-env rows only has no strategy table
        lambdas = summary.get("env_lambda", {})
        full = all(value > 0 for values in lambdas.values() for value in values)
        heading = "## Curriculum strategies under the full loop" if full else "## Curriculum strategies"
        lines += ["", heading, ""]
        if not full:  # say which envs ran the curriculum alone (rla bench --preset auto does, on some)
            per_env = "; ".join(f"{env} {', '.join(f'{v:g}' for v in vs)}" for env, vs in lambdas.items())
            lines += [f"Lambda, the PRM votes' weight in the reward (0: the curriculum alone): {per_env}."]
            lines.append("")
        lines += [
            "| strategy | in-domain success, IQM [95% CI] | OOD success | normalised area, IQM [95% CI] "
            f"| final training difficulty | training success (last {TRAIN_WINDOW} rollouts) | runs |",
            "|---|---|---|---|---:|---:|---:|",
        ]
    for name, row in summary["strategies"].items():
        lines.append(
            f"| {name} | {_cell(row['in_domain'])} | {_cell(row['ood'])} | "
            f"{_cell(row.get('normalised', (math.nan,) * 3))} | {_number(row['final_train_difficulty'])} | "
            f"{_number(row['train_success'])} | {row['runs']} |"
        )
    if summary.get("comparisons"):
        lines += [
            "",
            "## Pre-declared comparisons (paired runs, Holm-corrected)",
            "",
            f"Score: {summary['score']}. Pairs: the (env, seed) both rows ran. A comparison resolves "
            "when its Holm-adjusted p is below 0.05; one that does not cannot tell the rows apart "
            "at this number of seeds.",
            "",
            "| comparison | pairs | mean difference [95% CI] | P(improvement) | p | Holm p | resolved |",
            "|---|---:|---|---:|---:|---:|---|",
        ]
        for row in summary["comparisons"]:
            interval = _cell((row["difference"], row["low"], row["high"]))
            lines.append(
                f"| {row['comparison']} | {row['pairs']} | {interval} | {_number(row['p_improvement'])} | "
                f"{_p(row['p'])} | {_p(row['p_holm'])} | {_verdict(row)} |"
            )
    lines += [
        "",
        "## Per env (mean over seeds)",
        "",
        "| env | row | in-domain | OOD | d50 | area under success vs d | normalised "
        "| area under the learning curve | training success |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, cell in summary["per_env"].items():
        env, row = key.split(" / ", 1)
        names = ("d50", "auc", "auc_normalised", "auc_learning")
        extra = " | ".join(_number(cell.get(k, math.nan)) for k in names)
        trained = _number(cell.get("train_success", math.nan))
        scores = f"{_number(cell['in_domain'])} | {_number(cell['ood'])} | {extra} | {trained}"
        lines.append(f"| {env} | {row} | {scores} |")
    return "\n".join(lines) + "\n"


def write_tidy_csv(path: Path, runs: list[dict[str, Any]]) -> None:
    """One row per (run, evaluation step, level)."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env", "mode", "strategy", "seed", "row", "step", "level", "tier", "success"])
        for run in runs:
            spec, top = run["spec"], run["settings"]["max_difficulty"]
            for evaluation in run["evaluations"]:
                for level, success in evaluation["success"].items():
                    tier = "in-domain" if float(level) <= top else "ood"
                    writer.writerow(
                        [spec["env"], spec["mode"], spec["strategy"], spec["seed"], row_label(run),
                         evaluation["step"], level, tier, success]
                    )  # fmt: skip


def write_report(out: Path, run_ids: Sequence[str]) -> dict[str, Any]:
    """evals.csv, summary.json, summary.md and (with matplotlib) the PNG figures."""
    runs = sorted(load_runs(out, run_ids), key=_spec_key)
    write_tidy_csv(out / "evals.csv", runs)
    path = out / "references.json"
    summary = summarize(runs, json.loads(path.read_text()) if path.exists() else None)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "summary.md").write_text(markdown(summary))
    try:
        from agents.bench_plots import plot_all
    except ImportError:
        return summary
    with contextlib.suppress(ImportError):  # matplotlib (the plots extra) is missing: tables only
        plot_all(out, runs, summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m agents.bench_report OUT``: rewrite the report from the runs finished so far."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("out", type=Path, help="an rla bench results directory")
    args = parser.parse_args(argv)
    run_ids = sorted(path.stem for path in (args.out / "runs").glob("*.json"))
    write_report(args.out, run_ids)
    print((args.out / "summary.md").read_text())


if __name__ == "__main__":
    main()
