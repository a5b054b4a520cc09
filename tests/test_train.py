"""rla train / rla eval: checkpoints, resume after a kill, and refusals that protect written runs."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import RLA_ENV_IDS

from agents.cli import main
from agents.train import EVAL_LEVELS, TrainSettings, load_checkpoint, train


def _same(a: list, b: list) -> bool:
    """History rows compared as JSON: NaN metrics (no judgement yet) compare equal."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


FAST = [
    "--n-envs", "2", "--n-steps", "256", "--groups", "2", "--group-size", "4", "--eval-episodes", "5",
    "--device", "cpu",
]  # fmt: skip
#: PPO for the tests that count steps per rollout exactly
PPO_FAST = ["--algo", "ppo", "--n-envs", "2", "--n-steps", "256", "--eval-episodes", "5", "--device", "cpu"]


def test_killed_training_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "agents.cli",
        "train",
        "--steps",
        "8192",
        "--checkpoint-every",
        "512",
        "--out",
        str(out),
        *FAST,
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.kill()  # SIGKILL: no cleanup, no final checkpoint
    proc.wait()
    saved = load_checkpoint(out / "checkpoint.pt")  # atomic writes: never half-written
    assert 0 < saved["num_timesteps"] < 8192 and not (out / "results.json").exists()
    subprocess.run([*args, "--resume"], check=True, capture_output=True, timeout=300)
    final = load_checkpoint(out / "checkpoint.pt")
    assert final["num_timesteps"] >= 8192
    assert _same(final["history"][: len(saved["history"])], saved["history"])  # continued, not restarted
    assert len(final["history"]) > len(saved["history"])
    assert final["curriculum"]["episodes"] > saved["curriculum"]["episodes"]
    assert (out / "results.json").exists()
    steps = _logged_steps(out)  # the whole curve: the killed run's rows up to its checkpoint, then the rest
    assert steps == sorted(set(steps)) and steps[0] < 2000 and steps[-1] >= 8192
    assert len(steps) == len(final["history"])  # one row per round, none lost and none twice


def test_runs_made_before_auto_resume_and_load_with_their_own_encoder(tmp_path: Path) -> None:
    """A run that trained flatten (the default before ``auto``) resumes through the Python API on
    ``TrainSettings``' default, and ``load_run`` rebuilds flatten from a checkpoint whose settings
    have no encoder (those from before it was recorded)."""
    from agents.train import load_run

    out = tmp_path / "old"
    common = {"algo": "ppo", "out": str(out), "n_envs": 2, "n_steps": 256, "eval_episodes": 5}
    common["device"] = "cpu"
    train(TrainSettings(steps=512, encoder="flatten", **common))
    train(TrainSettings(steps=1024, resume=True, **common))  # encoder "auto": the run's own
    payload = load_checkpoint(out / "checkpoint.pt")
    assert payload["num_timesteps"] == 1024 and payload["settings"]["encoder"] == "flatten"
    del payload["settings"]["encoder"]
    torch.save(payload, out / "checkpoint.pt")
    model, settings = load_run(str(out))
    assert model.policy.features_extractor.encoder == settings.encoder == "flatten"


def test_rla_train_prints_the_run_directory_it_made(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--steps", "512", *PPO_FAST]) == 0
    (made,) = (tmp_path / "runs").iterdir()
    assert capsys.readouterr().out.rstrip().endswith(f"run directory: runs/{made.name}")


def test_resume_in_process_restores_state(tmp_path: Path) -> None:
    settings = TrainSettings(
        algo="ppo", steps=1024, out=str(tmp_path / "r"), n_envs=2, n_steps=256, eval_episodes=5, device="cpu"
    )
    train(settings)
    first = load_checkpoint(tmp_path / "r" / "checkpoint.pt")
    settings.steps, settings.resume = 2048, True
    train(settings)
    second = load_checkpoint(tmp_path / "r" / "checkpoint.pt")
    assert second["num_timesteps"] == 2048 and _same(
        second["history"][: len(first["history"])], first["history"]
    )
    assert len(second["history"]) > len(first["history"])
    assert second["curriculum"]["episodes"] > first["curriculum"]["episodes"]
    # PPO trains 10 epochs x (512 / 512) minibatches per 512-step rollout: the saved policy has seen them all
    assert (first["n_updates"], second["n_updates"]) == (20, 40)
    # the log keeps the first run's rows and adds the resumed ones, each step once
    assert _logged_steps(tmp_path / "r") == [512, 1024, 1536, 2048]
    saved = json.loads((tmp_path / "r" / "settings.json").read_text())
    assert saved["steps"] == 2048 and saved["resumes"] == [{"at_step": 1024, "steps": 2048}]
    assert saved["encoder"] == "lookup-lite"  # what the default "auto" resolved to, and resumed with


def _logged_steps(out: Path) -> list[int]:
    with open(out / "progress.csv") as f:
        return [int(float(row["time/total_timesteps"])) for row in csv.DictReader(f)]


def test_periodic_checkpoints_include_the_rollouts_update(tmp_path: Path, monkeypatch) -> None:
    import agents.train as module

    seen = []
    real = module.save_checkpoint

    def spy(path, settings, model, callback):
        seen.append((model.num_timesteps, model._n_updates))
        real(path, settings, model, callback)

    monkeypatch.setattr(module, "save_checkpoint", spy)
    train(
        TrainSettings(
            algo="ppo",
            steps=2048,
            out=str(tmp_path / "r"),
            n_envs=2,
            n_steps=256,
            checkpoint_every=512,
            eval_episodes=2,
            device="cpu",
        )
    )
    assert seen and all(updates == steps // 512 * 10 for steps, updates in seen), seen


def test_a_directory_that_is_not_a_run_is_never_written_to(tmp_path: Path, capsys) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "progress.csv").write_text("the user's own file\n")
    assert main(["train", "--steps", "512", "--out", str(out), *PPO_FAST]) == 2
    assert "non-empty directory that is not an rla train run" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["progress.csv"]
    assert (out / "progress.csv").read_text() == "the user's own file\n"


def test_refusals_never_touch_an_existing_run(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["train", "--steps", "512", "--out", str(out), *PPO_FAST]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["train", "--steps", "512", "--out", str(out), *PPO_FAST]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (
        main(["train", "--steps", "1024", "--out", str(out), "--resume", "--mode", "outcome", *PPO_FAST]) == 2
    )
    err = capsys.readouterr().err
    assert "differ from the run in" in err and "'mode' (the run's 'env', given 'outcome')" in err
    assert (
        main(["train", "--steps", "1024", "--out", str(out), "--resume", "--env", "CartPole-v1", *PPO_FAST])
        == 2
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert main(["eval", "--run", str(out), "--episodes", "3"]) == 0


def test_resume_takes_the_run_s_own_settings_and_the_flags_given(tmp_path: Path, capsys) -> None:
    """``--resume`` alone continues a run trained with non-default flags (its settings.json);
    ``--steps`` moves the target; a flag that changes the loop is still refused by name."""
    out = tmp_path / "run"
    flags = ["--mode", "outcome", "--difficulty", "0", "--learning-rate", "0.001", *PPO_FAST]
    assert main(["train", "--steps", "512", "--out", str(out), *flags]) == 0
    capsys.readouterr()
    assert main(["train", "--out", str(out), "--resume"]) == 0  # the target is reached already
    assert "has trained 512 steps of its 512: nothing to train" in capsys.readouterr().out
    assert main(["train", "--out", str(out), "--resume", "--steps", "1024"]) == 0
    assert "algo ppo, mode outcome (Outcome-only), difficulty 0.0: 1024 steps" in capsys.readouterr().out
    saved = json.loads((out / "settings.json").read_text())
    assert saved["steps"] == 1024 and saved["mode"] == "outcome" and saved["learning_rate"] == 0.001
    assert load_checkpoint(out / "checkpoint.pt")["num_timesteps"] == 1024
    assert main(["train", "--out", str(out), "--resume", "--steps", "2048", "--mode", "env"]) == 2
    assert "differ from the run in" in capsys.readouterr().err


def test_rla_train_picks_settings_by_env_and_resumes_runs_made_without_them(tmp_path: Path, capsys) -> None:
    """``--preset auto``, the default: on the GUI MaskablePPO with the curriculum alone (lambda 0),
    said first and recorded; a flag given wins; ``--resume`` keeps a run's own settings, also
    for a run made with the paper's loop (``--preset ''``), which the default would change."""
    out = tmp_path / "gui"
    assert main(["train", "--env", "RLA-GUI-v1", "--steps", "512", "--out", str(out), *FAST]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("training RLA-GUI-v1 (maskable-ppo, mode env, lambda 0, encoder lookup-lite)")
    assert "algo maskable-ppo, mode env (the curriculum alone: lambda 0)" in printed
    saved = json.loads((out / "settings.json").read_text())
    assert (saved["algo"], saved["lam"], saved["preset"]) == ("maskable-ppo", 0.0, "")
    paper = tmp_path / "paper"
    argv = ["train", "--env", "RLA-GUI-v1", "--preset", "", "--steps", "8", "--out", str(paper)]
    assert main([*argv, *FAST]) == 0
    saved = json.loads((paper / "settings.json").read_text())
    assert (saved["algo"], saved["lam"]) == ("grpo", 1.0)
    capsys.readouterr()
    assert main(["train", "--out", str(paper), "--resume", "--steps", "16"]) == 0
    assert "algo grpo, mode env (the full loop)" in capsys.readouterr().out
    assert load_checkpoint(paper / "checkpoint.pt")["num_timesteps"] >= 16
    given = tmp_path / "given"
    argv = ["train", "--env", "RLA-Household-v0", "--lam", "0.3", "--steps", "512", "--out", str(given)]
    assert main([*argv, *FAST]) == 0
    saved = json.loads((given / "settings.json").read_text())
    assert (saved["algo"], saved["lam"]) == ("maskable-ppo", 0.3)


def test_the_group_trainer_needs_one_round_of_steps_not_n_steps_times_n_envs(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["train", "--steps", "100", "--groups", "2", "--group-size", "4", "--n-steps", "256",
            "--n-envs", "4", "--eval-episodes", "2", "--device", "cpu", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0  # 100 < n_steps * n_envs, which grpo does not use
    assert load_checkpoint(out / "checkpoint.pt")["num_timesteps"] >= 100


def test_resume_may_run_on_another_device(tmp_path: Path, capsys) -> None:
    """The device is where a run trains, not what it trains: a run made on CUDA resumes on the
    CPU (the checkpoint loads onto the CPU, then onto the run's device; the generators that lived
    on CUDA, whose states do not fit a CPU generator, are reseeded with a warning)."""
    out = tmp_path / "run"
    assert main(["train", "--steps", "512", "--out", str(out), *PPO_FAST]) == 0
    payload = torch.load(out / "checkpoint.pt", weights_only=True)
    payload["settings"]["device"] = "cuda"  # as a run made with --device cuda records it
    cuda_state = torch.zeros(16, dtype=torch.uint8)  # a CUDA generator's state (seed, offset)
    assert payload["prm_votes_rng"] is not None and payload["reward_votes_rng"] is not None
    payload["prm_votes_rng"] = payload["reward_votes_rng"] = cuda_state  # the PRM's, on its device
    torch.save(payload, out / "checkpoint.pt")
    recorded = json.loads((out / "settings.json").read_text())
    (out / "settings.json").write_text(json.dumps({**recorded, "device": "cuda"}))
    capsys.readouterr()
    with pytest.warns(RuntimeWarning, match="another kind of device than cpu: it continues from seed"):
        assert main(["train", "--out", str(out), "--resume", "--steps", "1024", "--device", "cpu"]) == 0
    assert load_checkpoint(out / "checkpoint.pt")["num_timesteps"] == 1024
    assert main(["train", "--out", str(out), "--resume", "--steps", "2048", "--lam", "2"]) == 2
    assert "differ from the run in" in capsys.readouterr().err  # what it trains still may not change


def test_a_settings_json_that_is_not_valid_json_is_named(tmp_path: Path, capsys) -> None:
    from agents.train import resume_settings

    out = tmp_path / "run"
    assert main(["train", "--steps", "512", "--out", str(out), *PPO_FAST]) == 0
    text = (out / "settings.json").read_text()
    (out / "settings.json").write_text(text[: len(text) // 2])  # truncated
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert main(["train", "--out", str(out), "--resume", "--steps", "1024"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rla: error: {out / 'settings.json'} is not valid JSON (") and "restore it" in err
    settings = TrainSettings(algo="ppo", steps=1024, out=str(out), resume=True, n_envs=2, eval_episodes=5,
                             device="cpu")  # fmt: skip
    with pytest.raises(ValueError, match="settings.json is not valid JSON"):
        resume_settings(settings, {"steps"})
    with pytest.raises(ValueError, match="settings.json is not valid JSON"):
        train(settings)  # the Python API: named before the resumed run writes anything
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_full_disk_while_checkpointing_keeps_the_previous_checkpoint(tmp_path: Path, monkeypatch, capsys):
    from agents.train import _atomic_save

    out = tmp_path / "run"
    assert main(["train", "--steps", "512", "--out", str(out), *PPO_FAST]) == 0
    saved = (out / "checkpoint.pt").read_bytes()

    def full_disk(obj, f, *args, **kwargs):
        Path(f).write_bytes(b"half a checkpoint")
        raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match="previous checkpoint.pt is intact"):
        _atomic_save({}, out / "checkpoint.pt")
    capsys.readouterr()
    assert main(["train", "--out", str(out), "--resume", "--steps", "1024"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rla: error: could not save {out / 'checkpoint.pt'} (PytorchStreamWriter failed")
    assert "the previous checkpoint.pt is intact" in err and "Traceback" not in err
    assert (out / "checkpoint.pt").read_bytes() == saved
    assert not [p for p in out.iterdir() if p.suffix == ".tmp"]


def test_ctrl_c_says_where_the_last_checkpoint_is_and_resume_continues(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    import agents.train as module

    out = tmp_path / "run"
    real = module.CheckpointCallback._on_rollout_start

    def then_ctrl_c(self) -> None:
        real(self)
        if (out / "checkpoint.pt").exists():
            raise KeyboardInterrupt

    monkeypatch.setattr(module.CheckpointCallback, "_on_rollout_start", then_ctrl_c)
    argv = ["train", "--steps", "2048", "--checkpoint-every", "512", "--out", str(out), *PPO_FAST]
    assert main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert err == (
        f"rla: interrupted; the last checkpoint is at {out / 'checkpoint.pt'}: "
        f"continue with rla train --out {out} --resume"
    )
    assert load_checkpoint(out / "checkpoint.pt")["num_timesteps"] == 512
    monkeypatch.undo()
    assert main(["train", "--out", str(out), "--resume"]) == 0
    assert load_checkpoint(out / "checkpoint.pt")["num_timesteps"] == 2048

    def ctrl_c(settings):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "build_loop", ctrl_c)
    capsys.readouterr()
    assert main(["train", "--steps", "512", "--out", str(tmp_path / "new"), *PPO_FAST]) == 130
    assert capsys.readouterr().err.strip() == (
        f"rla: interrupted before the first checkpoint; start again with rla train --out {tmp_path / 'new'} "
        "and the same flags"
    )


def test_an_out_that_is_a_file_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "run").write_text("mine\n")
    assert main(["train", "--steps", "512", "--out", str(tmp_path / "run"), *PPO_FAST]) == 2
    assert "is a file, not a run directory; choose another --out" in capsys.readouterr().err
    assert (tmp_path / "run").read_text() == "mine\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"not a checkpoint at all", "not a readable rla-gym checkpoint"), (None, "not an rla-gym checkpoint")],
)
def test_corrupt_or_foreign_checkpoints_are_refused(tmp_path: Path, content, message, capsys) -> None:
    out = tmp_path / "run"
    out.mkdir()
    if content is None:
        torch.save({"model": torch.zeros(2)}, out / "checkpoint.pt")
    else:
        (out / "checkpoint.pt").write_bytes(content)
    assert main(["train", "--resume", "--out", str(out), *PPO_FAST]) == 2
    err = capsys.readouterr().err
    assert message in err and "weights_only" not in err  # no advice to load untrusted code
    assert main(["eval", "--run", str(out)]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--m", "0"], "m must be an integer >= 1, got 0"),
        (["--lam", "-1"], "lam must be a finite number >= 0, got -1.0"),
        (["--curriculum", "magic"], "curriculum must be one of"),
        (["--algo", "dqn"], "algo must be one of"),
        (["--encoder", "lstm"], "got 'lstm'"),
        (["--env", "Nope-v0"], "Nope"),
        (["--objective", "supervised"], "trained from outcomes alone"),
        (["--device", "nonsense"], "device must be 'auto', 'cpu' or 'cuda[:N]', got 'nonsense'"),
        # grpo (the default) rolls out groups * group_size episodes, not n_steps * n_envs steps
        (
            ["--steps", "10"],
            "steps must be >= one round (groups * group_size episodes = 64, each at least one",
        ),
        (
            ["--algo", "ppo", "--steps", "1000"],
            "steps must be >= one rollout (n_steps * n_envs = 1024), got 1000",
        ),
        (["--seed", "-1"], "seed must be an integer >= 0, got -1"),
        (["--eval-episodes", "0"], "--eval-episodes must be >= 1, got 0"),
        (["--checkpoint-every", "0"], "--checkpoint-every must be an integer >= 1 (env steps), got 0"),
        (["--checkpoint-every", "-5"], "--checkpoint-every must be an integer >= 1 (env steps), got -5"),
        (["--resume"], "holds no run (checkpoint.pt is missing)"),
        (["--objective", "consistency", "--m", "1"], "needs m >= 2 votes"),
        (["--n-steps", "1", "--n-envs", "1"], "must be >= 2"),
    ],
)
def test_bad_train_settings_write_nothing(tmp_path: Path, capsys, args, message) -> None:
    out = tmp_path / "never"
    assert main(["train", "--out", str(out), *args]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_training_writes_curves(tmp_path: Path) -> None:
    out = tmp_path / "run"
    train(
        TrainSettings(
            algo="ppo", steps=1024, out=str(out), n_envs=2, n_steps=256, eval_episodes=2, device="cpu"
        )
    )
    png = (out / "curves.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000


def test_a_start_that_failed_before_its_first_checkpoint_can_be_retried(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "settings.json").write_text("{}")  # what a crash before the first checkpoint leaves
    assert main(["train", "--steps", "512", "--out", str(out), *PPO_FAST]) == 0
    assert (out / "checkpoint.pt").exists()


@pytest.mark.parametrize("env_id", RLA_ENV_IDS)
@pytest.mark.parametrize("algo", ["ppo", "maskable-ppo", "grpo"])
def test_rla_train_runs_the_closed_loop_on_every_env(tmp_path: Path, env_id: str, algo: str) -> None:
    out = tmp_path / "run"
    assert main(["train", "--env", env_id, "--algo", algo, "--steps", "512", "--out", str(out), *FAST]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] >= 512
    assert [row["difficulty"] for row in results["evaluation"]] == list(EVAL_LEVELS)
    rows = results["evaluation"]
    assert all(set(row) == {"difficulty", "success", "success_greedy", "mean_length", "mean_length_greedy"}
               for row in rows)  # fmt: skip
    assert all(row["mean_length"] >= 1 and row["mean_length_greedy"] >= 1 for row in rows)  # episodes ran


def test_checkpoints_keep_the_prms_replay_window(tmp_path: Path) -> None:
    from agents.loop import LoopSettings, build_loop
    from agents.train import _loop_fields, _restore

    settings = TrainSettings(
        algo="ppo",
        steps=1536, out=str(tmp_path / "r"), mode="reward", prm_replay=3, n_envs=2, n_steps=256,
        eval_episodes=2, device="cpu",
    )  # fmt: skip
    train(settings)
    payload = load_checkpoint(tmp_path / "r" / "checkpoint.pt")
    episodes = [int(row["loop/episodes"]) for row in payload["history"]]
    # a window of 3: the next rollout joins the last 2, so only those are kept
    assert [len(rollout) for rollout in payload["prm_replay"]] == episodes[-2:]
    model, callback = build_loop(LoopSettings(**_loop_fields(settings)))
    _restore(payload, model, callback)
    assert [len(rollout) for rollout in callback.replay] == episodes[-2:]
    saved, restored = payload["prm_replay"][-1][0], callback.replay[-1][0]
    assert np.array_equal(restored.obs, saved["obs"].numpy()) and restored.outcome == saved["outcome"]
    assert restored.labels is not None and restored.task_id == saved["task_id"]
    train(
        TrainSettings(
            algo="ppo",
            steps=512,
            out=str(tmp_path / "d"),
            n_envs=2,
            n_steps=256,
            eval_episodes=2,
            device="cpu",
        )
    )
    assert load_checkpoint(tmp_path / "d" / "checkpoint.pt")["prm_replay"] == []  # window 1: nothing to keep


def test_the_fast_preset_trains_with_the_flags_given_beside_it(tmp_path: Path) -> None:
    """``--preset fast`` sets the batched fast path; a flag given with it (even at its default
    value) wins, the run records the settings it got, and --resume with the same flags works."""
    from agents.loop import PRESETS

    out = tmp_path / "run"
    flags = ["--preset", "fast", "--n-envs", "16", "--n-steps", "256", "--mode", "outcome",
             "--out", str(out), "--eval-episodes", "2", "--device", "cpu"]  # fmt: skip
    assert main(["train", "--steps", "4096", *flags]) == 0
    recorded = json.loads((out / "settings.json").read_text())
    fast = PRESETS["fast"]
    assert recorded["n_envs"] == 16 and recorded["n_steps"] == 256  # given: theirs (256 is the default)
    for key in ("algo", "vec_env", "batch_size", "n_epochs", "learning_rate"):
        assert recorded[key] == fast[key], key
    assert recorded["preset"] == ""
    assert json.loads((out / "results.json").read_text())["steps"] == 4096
    assert main(["train", "--steps", "8192", "--resume", *flags]) == 0
    assert json.loads((out / "results.json").read_text())["steps"] == 8192


def test_an_unknown_preset_is_refused_by_name(tmp_path: Path, capsys) -> None:
    assert main(["train", "--preset", "fastest", "--out", str(tmp_path / "run")]) == 2
    assert "preset must be one of ('auto', 'fast', 'lean') or '', got 'fastest'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_run_with_history_trains_evaluates_and_resumes(tmp_path: Path) -> None:
    """The final evaluation feeds a history policy its history (batched evaluator), and a
    run with a PRM of its own size records it and resumes with it."""
    out = tmp_path / "run"
    flags = ["--algo", "maskable-ppo", "--history", "1", "--mode", "env", "--prm-embed-dim", "4",
             "--prm-hidden", "8", "--n-envs", "2", "--n-steps", "128", "--eval-episodes", "3",
             "--out", str(out), "--device", "cpu"]  # fmt: skip
    assert main(["train", "--steps", "256", *flags]) == 0
    results = json.loads((out / "results.json").read_text())
    assert [row["difficulty"] for row in results["evaluation"]] == list(EVAL_LEVELS)
    payload = load_checkpoint(out / "checkpoint.pt")
    assert payload["settings"]["prm_hidden"] == 8 and payload["settings"]["history"] == 1
    assert main(["train", "--steps", "512", "--resume", *flags]) == 0
    assert json.loads((out / "results.json").read_text())["steps"] == 512


def test_the_lean_preset_trains_on_the_batched_ppo_in_the_mode_given(tmp_path: Path) -> None:
    for mode in ("outcome", None):  # None: the default mode, the full loop
        out = tmp_path / f"run-{mode}"
        argv = ["train", "--preset", "lean", "--difficulty", "0.1", "--steps", "2048", "--out", str(out),
                "--eval-episodes", "2", "--device", "cpu", *(["--mode", mode] if mode else [])]  # fmt: skip
        assert main(argv) == 0
        recorded = json.loads((out / "settings.json").read_text())
        assert (recorded["algo"], recorded["mode"], recorded["n_envs"], recorded["n_steps"]) == (
            "batched-ppo",
            mode or "env",
            256,
            4,
        )
        assert (recorded["prm_embed_dim"], recorded["prm_hidden"]) == (8, 64)
        assert json.loads((out / "results.json").read_text())["steps"] == 2048


def _same_state(a: object, b: object) -> bool:
    """Nested state (dicts, lists, tuples, tensors, arrays, numbers) equal, tensors exactly."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b, strict=True))
    return _same([a], [b])


@pytest.mark.parametrize("algo", ["ppo", "grpo", "batched-ppo"])
def test_a_resumed_loop_holds_every_saved_state(tmp_path: Path, algo: str) -> None:
    """``_restore`` puts back the policy and its optimizer, the PRM, its optimizer and both
    vote generators, the trainer's minibatch RNG and the curriculum, each equal to the
    checkpoint's (a fresh loop differs in each that training moved)."""
    from agents.loop import LoopSettings, build_loop
    from agents.train import _loop_fields, _loop_state, _restore

    out = tmp_path / "run"
    assert main(["train", "--steps", "1024", "--out", str(out), "--algo", algo, *FAST]) == 0
    payload = load_checkpoint(out / "checkpoint.pt")
    settings = TrainSettings(**{k: v for k, v in payload["settings"].items() if k != "resumes"})
    model, callback = build_loop(LoopSettings(**_loop_fields(settings)))
    # a generator the run never drew from (the consistency objectives' votes) still has to come back
    torch.rand(1, generator=callback.trainer.generator)
    fresh = _loop_state(callback)
    moved = ["prm", "prm_optimizer", "prm_rng", "prm_votes_rng", "reward_votes_rng", "curriculum"]
    assert [k for k in moved if _same_state(fresh[k], payload[k])] == []  # nothing restored by chance
    _restore(payload, model, callback)
    restored = _loop_state(callback)
    assert [k for k in moved if not _same_state(restored[k], payload[k])] == []
    assert _same_state(model.policy.state_dict(), payload["policy"])
    assert _same_state(model.policy.optimizer.state_dict(), payload["policy_optimizer"])
    assert model.num_timesteps == payload["num_timesteps"] and model._n_updates == payload["n_updates"]
    # the CUDA generators travel too (SB3 samples actions there on a GPU); none on a CPU machine
    assert "cuda" in payload["rng"] and (payload["rng"]["cuda"] is None) == (not torch.cuda.is_available())


@pytest.mark.parametrize("algo", ["ppo", "batched-ppo"])
def test_a_resumed_noisy_oracle_run_goes_on_with_its_vote_flips(tmp_path: Path, algo: str) -> None:
    """Mode noisy-oracle's vote-flip generator is saved and restored (a resumed run flips the votes
    the run continued in place would), on both the SB3 and the batched path."""
    from agents.loop import LoopSettings, build_loop
    from agents.train import _loop_fields, _loop_state, _restore

    out = tmp_path / "run"
    args = ["train", "--steps", "1024", "--out", str(out), "--algo", algo, "--mode", "noisy-oracle", *FAST]
    assert main(args) == 0
    payload = load_checkpoint(out / "checkpoint.pt")
    settings = TrainSettings(**{k: v for k, v in payload["settings"].items() if k != "resumes"})
    model, callback = build_loop(LoopSettings(**_loop_fields(settings)))
    assert _loop_state(callback)["reward_flips_rng"] != payload["reward_flips_rng"]  # the run drew flips
    _restore(payload, model, callback)
    assert _loop_state(callback)["reward_flips_rng"] == payload["reward_flips_rng"]
    del payload["reward_flips_rng"]  # a checkpoint from before it: the generator starts from the seed
    model, callback = build_loop(LoopSettings(**_loop_fields(settings)))
    fresh = _loop_state(callback)["reward_flips_rng"]
    _restore(payload, model, callback)
    assert _loop_state(callback)["reward_flips_rng"] == fresh


def test_load_run_evaluates_the_trained_policy(tmp_path: Path, monkeypatch, capsys) -> None:
    """``rla eval``'s loader gives the checkpoint's weights, not a new policy's; ``rla eval``
    without ``--run`` takes the newest run under runs/, says which run it evaluates and runs
    torch on one thread, as ``rla train`` does."""
    from agents.train import load_run

    monkeypatch.chdir(tmp_path)
    out = Path("runs") / "mine"
    assert main(["train", "--steps", "512", "--out", str(out), *PPO_FAST]) == 0
    started = "training RLA-TextNav-v0 (ppo, mode env, lambda 1, encoder lookup-lite) from step 0 to 512"
    started += f" in {out}\n"
    assert capsys.readouterr().out.startswith(started)  # a line before the training's silence
    import agents.train

    seen: list[int] = []

    def evaluate_both(*args):
        seen.append(torch.get_num_threads())
        return real(*args)

    real, threads = agents.train.evaluate_both, torch.get_num_threads()
    monkeypatch.setattr(agents.train, "evaluate_both", evaluate_both)
    try:
        torch.set_num_threads(2)
        assert main(["eval", "--episodes", "2", "--levels", "0"]) == 0
        assert seen == [1] and torch.get_num_threads() == 2  # one thread for the run, then restored
    finally:
        torch.set_num_threads(threads)
    assert capsys.readouterr().out.startswith(f"run {out}: RLA-TextNav-v0, algo ppo, mode env, 512 steps\n")
    assert main(["eval", "--episodes", "2", "--levels", "0", "--llm", "scripted:oracle"]) == 0
    printed = capsys.readouterr().out  # beside an LLM too, and its row names the directory
    assert printed.startswith(f"run {out}: RLA-TextNav-v0") and f"ppo: {out}" in printed
    assert main(["eval", "--run", "runs/none"]) == 2
    assert "no run in runs/none: checkpoint.pt is missing" in capsys.readouterr().err
    saved = load_checkpoint(out / "checkpoint.pt")["policy"]
    model, settings = load_run(str(out))
    assert settings.algo == "ppo" and model.num_timesteps == 512
    assert _same_state(model.policy.state_dict(), saved)
    from agents.loop import LoopSettings, build_loop
    from agents.train import _loop_fields

    untrained, _ = build_loop(LoopSettings(**_loop_fields(settings)))  # what a loader that forgot would give
    assert not _same_state(untrained.policy.state_dict(), saved)


def test_flags_a_run_does_not_read_are_named_before_it_trains(tmp_path: Path, capsys) -> None:
    """``rla train`` notes each typed flag its run ignores (with why), then trains as asked; flags
    it reads, and settings a flag did not set, get no note."""
    from agents.loop import LoopSettings, ignored_settings

    args = ["train", "--steps", "512", "--out", str(tmp_path / "run"), "--difficulty", "0.3", "--mu", "1.2"]
    ppo = PPO_FAST  # no group-trainer flags: PPO would not read them
    assert main([*args, *ppo]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("training RLA-TextNav-v0 (ppo, mode env, lambda 1, encoder")
    assert "rla: note: --difficulty: mode env's curriculum 'task-pool-fresh' picks every episode" in err
    assert "rla: note: --mu: only mode noisy-oracle reads it; ignored" in err
    assert err.count("rla: note:") == 2  # --n-envs, --n-steps and the others are read by PPO
    env = LoopSettings(mode="env", curriculum="fixed", algo="grpo")
    assert ignored_settings(env, {"difficulty", "curriculum", "lam", "groups"}) == []
    outcome = LoopSettings(mode="outcome", algo="ppo")
    notes = ignored_settings(outcome, {"lam", "objective", "groups", "n_envs"})
    assert [note.split(":")[0] for note in notes] == ["--lam", "--objective", "--groups"]
    assert ignored_settings(outcome, set()) == []
    plain = ["train", "--steps", "512", "--out", str(tmp_path / "plain"), "--mode", "outcome", "--lam", "0"]
    assert main([*plain, *ppo]) == 0
    out, err = capsys.readouterr()  # mode outcome casts no votes: no lambda said, and --lam noted
    assert out.startswith("training RLA-TextNav-v0 (ppo, mode outcome, encoder")
    assert "rla: note: --lam: mode outcome casts no votes; ignored" in err
