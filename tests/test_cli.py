"""The ``rla`` command line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from agents.cli import DemoSettings, PlaySettings, build_parser, demo, main, play


def test_demo_rows_show_the_difficulty_gradient(capsys) -> None:
    rows = demo(DemoSettings(difficulties=(0.0, 1.0), episodes=40))
    out = capsys.readouterr().out
    assert "oracle success" in out and "random success" in out
    assert [r["oracle_success"] for r in rows] == [1.0, 1.0]
    assert rows[0]["optimal_len"] < rows[1]["optimal_len"]
    assert rows[0]["random_success"] > rows[1]["random_success"]
    assert all(r["steps_per_second"] > 0 for r in rows)


def test_parser_is_generated_from_the_settings() -> None:
    args = build_parser().parse_args(["demo", "--difficulties", "0.1", "0.9", "--episodes", "3"])
    assert args.difficulties == [0.1, 0.9] and args.episodes == 3 and args.env == "RLA-TextNav-v0"
    assert build_parser().parse_args(["play", "--seed", "4"]).seed == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--difficulties", "1.5", "--episodes", "2"], "difficulty must be in [0, 1], got 1.5"),
        (["demo", "--episodes", "0"], "error: --episodes must be >= 1, got 0"),  # the flag, not the field
        (["train", "--n-envs", "0"], "error: --n-envs must be an integer >= 1, got 0"),
        (["demo", "--env", "CartPole-v1", "--episodes", "1"], "'CartPole-v1' is not an rla-gym environment"),
        (["demo", "--env", "Nope-v0"], "unknown env id 'Nope-v0'; the rla-gym ids are ['RLA-GUI-v0'"),
        (["play", "--env", "Nope-v0"], "unknown env id 'Nope-v0'; the rla-gym ids are ['RLA-GUI-v0'"),
        (["demo", "--difficulties", "0,2", "--episodes", "2"], "difficulty must be in [0, 1], got 2.0"),
        (["play", "--seed", "-1"], "Seed must be greater or equal to zero"),
    ],
)
def test_bad_cli_values_give_a_clear_error(capsys, argv, message) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("rla: error:") and message in err
    assert out == ""  # refused before any output (demo checks every level before its first row)


def test_play_quits_cleanly_at_end_of_input() -> None:
    def closed(prompt: str) -> str:
        raise EOFError

    assert play(PlaySettings(seed=0), read=closed) is False

    def interrupted(prompt: str) -> str:
        raise KeyboardInterrupt

    assert play(PlaySettings(seed=0), read=interrupted) is False  # Ctrl-C quits without a traceback


def test_unparsable_cli_values_exit_with_usage() -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--episodes", "many"])


def test_play_follows_typed_commands(capsys) -> None:
    import gymnasium as gym

    env = gym.make("RLA-TextNav-v0", difficulty=0.0)
    _, info = env.reset(seed=3)
    answers = []
    while True:  # the oracle's commands for the same seeded episode, typed by name and number
        action = np.flatnonzero(info["oracle_mask"]).tolist()[0]
        answers.append(env.unwrapped.action_names[action].upper() if len(answers) % 2 else str(action))
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    typed = iter(["nonsense", *answers])
    assert play(PlaySettings(difficulty=0.0, seed=3), read=lambda prompt: next(typed))
    out = capsys.readouterr().out
    assert "Not an admissible command: 'nonsense'" in out and "Success!" in out


def test_console_script_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agents.cli", "demo", "--difficulties", "0.5", "--episodes", "5"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "0.50" in result.stdout


def test_demo_and_play_never_import_the_torch_side() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from agents.cli import main; "
        "main(['demo', '--episodes', '1', '--difficulties', '0.1']); "
        "assert not {'torch', 'stable_baselines3'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)


def test_eval_takes_llm_policies_on_the_same_tasks(capsys) -> None:
    args = build_parser().parse_args(
        ["eval", "--run", "", "--llm", "scripted:oracle", "openai:http://h:8000/v1:m"]
    )
    assert args.llm == ["scripted:oracle", "openai:http://h:8000/v1:m"] and args.run == ""
    assert (
        main(["eval", "--run", "", "--env", "RLA-GUI-v0", "--episodes", "2", "--llm", "scripted:oracle"]) == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("RLA-GUI-v0: held-out success on 2 tasks per difficulty")
    assert out.count("scripted:oracle") == 11  # one row per level of the protocol's grid
    assert main(["eval", "--run", "", "--env", "RLA-GUI-v0", "--episodes", "2", "--levels", "0.2", "0.6",
                 "--llm", "scripted:oracle"]) == 0  # fmt: skip
    assert capsys.readouterr().out.count("scripted:oracle") == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "--run", ""], "nothing to evaluate: give --run, --llm or both"),
        (
            ["eval", "--run", "", "--levels", "0.5", "0.2"],
            "levels must be at least one difficulty, increasing strictly",
        ),
        (["eval", "--run", "", "--levels", "1.5"], "level must be in [0, 1], got 1.5"),
        (["eval", "--run", "", "--llm", "scripted:oracle"], "an LLM-only evaluation needs --env"),
        (
            ["eval", "--run", "", "--env", "RLA-TextNav-v0", "--llm", "gpt"],
            "an LLM policy is scripted:oracle",
        ),
        (
            ["eval", "--run", "", "--env", "CartPole-v1", "--llm", "scripted:oracle"],
            "not an rla-gym environment",
        ),
        (
            ["eval", "--run", "", "--env", "Foo", "--llm", "scripted:oracle"],
            "unknown env id 'Foo'; the rla-gym ids are",
        ),
        (["eval", "--run", "", "--env", "RLA-TextNav-v0", "--llm", "openai:localhost"], "URL:MODEL"),
    ],
)
def test_bad_eval_llm_options_give_a_clear_error(capsys, argv, message) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("rla: error:") and message in err


def test_eval_defaults_to_the_newest_run(tmp_path, monkeypatch, capsys) -> None:
    """``rla eval`` with no --run evaluates the newest run under runs/, or says there is none."""
    import os

    from agents.cli import _resolve_run

    monkeypatch.chdir(tmp_path)
    assert main(["eval"]) == 2
    assert "no run to evaluate: runs/ holds no checkpoint" in capsys.readouterr().err
    for age, name in ((200, "old"), (100, "new")):
        (tmp_path / "runs" / name).mkdir(parents=True)
        checkpoint = tmp_path / "runs" / name / "checkpoint.pt"
        checkpoint.write_bytes(b"")
        os.utime(checkpoint, (1e9 - age, 1e9 - age))
    assert _resolve_run("latest") == os.path.join("runs", "new")
    assert _resolve_run("runs/old") == "runs/old"


def test_a_config_file_value_wins_over_the_preset_even_at_its_default(tmp_path, monkeypatch) -> None:
    """defaults < the preset < the config file < flags given on the command line."""
    import agents.cli as cli

    seen = []
    text, settings_of, _ = cli.COMMANDS["bench"]
    monkeypatch.setitem(cli.COMMANDS, "bench", (text, settings_of, seen.append))
    config = tmp_path / "bench.toml"
    config.write_text('n_envs = 4\nencoder = "flatten"\nn_epochs = 7\n')  # n_envs, encoder at defaults
    assert main(["bench", "--config", str(config), "--preset", "fast", "--n-epochs", "3"]) == 0
    (settings,) = seen
    assert (settings.n_envs, settings.encoder) == (4, "flatten")  # the file's, not the preset's
    assert settings.n_epochs == 3 and settings.vec_env == "batched" and settings.preset == ""
