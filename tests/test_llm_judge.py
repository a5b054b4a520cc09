"""The LLM judge (votes, statistics, backends), LLM evaluation next to RL agents, the GPU check's skip."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from agents.llm.backends import OpenAIBackend, ScriptedBackend, TransformersBackend
from agents.llm.evaluate import (
    LLMPolicy,
    ScriptedPolicy,
    evaluate_llm,
    evaluate_text_policy,
    policy_from_spec,
)
from agents.llm.judge import JUDGE_INSTRUCTION, LLMJudge, final_box, judge_messages, parse_vote
from rla_gym.evaluation import evaluate, heldout_seeds, oracle_agent
from rla_gym.llm import TextEpisode
from rla_gym.stats import precision_bound
from rla_gym.wrappers import AdaptiveDifficultyWrapper

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- the vote parser (no torch)


@pytest.mark.parametrize(
    ("reply", "vote"),
    [
        ("The step helps. \\boxed{1}", 1),
        ("\\boxed{+1}", 1),
        ("\\boxed{-1}", -1),
        ("\\boxed{ \u22121 }", -1),  # a unicode minus
        ("\\boxed{\u20131}", -1),  # an en dash
        ("first \\boxed{-1}, then on reflection \\boxed{1}", 1),  # the last box counts
        ("\\boxed{\\text{1}}", 1),  # nested braces
        ("\\boxed{score 1 for step 4}", 1),  # one signal among other numbers
        ("\\boxed{1/8}", 0),  # a fraction is unusable
        ("\\boxed{1 or -1}", 0),  # two signals: ambiguous
        ("\\boxed{2}", 0),
        ("\\boxed{}", 0),
        ("\\boxed{yes}", 0),
        ("\\boxed{1", 0),  # never closed
        ("I would say 1", 0),  # no box
        ("", 0),
    ],
)
def test_votes_parse_as_the_authors_do(reply: str, vote: int) -> None:
    assert parse_vote(reply) == vote


def test_the_last_closed_box_is_read_with_its_nested_braces() -> None:
    assert final_box("\\boxed{a} \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert final_box("no box") is None and final_box("\\boxed{open") is None


def test_the_parser_and_the_judge_never_import_torch() -> None:
    code = (
        "import sys; from agents.llm.judge import LLMJudge, parse_vote; "
        "from agents.llm.backends import ScriptedBackend, OpenAIBackend; import agents.llm.evaluate; "
        "assert parse_vote('\\\\boxed{1}') == 1; "
        "assert not {'torch', 'transformers'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)


# ---------------------------------------------------------------- the judge, scripted

STEPS = [("prompt A1", "reply A1", "next A1"), ("prompt A2", "reply A2", "next A2"), ("prompt B1", "r", "n")]
#: m = 3 replies per step, in the order the judge asks: A1, A2 (episode A), B1 (episode B)
REPLIES = [
    "\\boxed{1}", "\\boxed{1}", "\\boxed{-1}",
    "\\boxed{1}", "no box at all", "\\boxed{1}",
    "\\boxed{-1}", "\\boxed{-1}", "\\boxed{1}",
]  # fmt: skip


@pytest.mark.llm
@pytest.mark.parametrize(
    ("unparsable", "a2_votes", "a2_score", "p_plus"),
    [
        ("zero", [1, 0, 1], 2 / 3, 4 / 5),
        ("negative", [1, -1, 1], 1 / 3, 4 / 6),
        ("skip", [1, 0, 1], 1.0, 4 / 5),
    ],
)
def test_scripted_judge_statistics_match_a_hand_computation(unparsable, a2_votes, a2_score, p_plus) -> None:
    judge = LLMJudge(ScriptedBackend(REPLIES), m=3, unparsable=unparsable)
    a, b = judge.judge_episodes([STEPS[:2], STEPS[2:]])
    assert a.votes.tolist() == [[1, 1, -1], a2_votes] and b.votes.tolist() == [[-1, -1, 1]]
    assert a.parsed.tolist() == [[True, True, True], [True, False, True]]
    assert np.allclose(a.scores, [1 / 3, a2_score]) and np.allclose(b.scores, [-1 / 3])
    assert a.outcome == pytest.approx((1 / 3 + a2_score) / 2) and b.outcome == pytest.approx(-1 / 3)
    assert a.unparsable_share == pytest.approx(1 / 6) and b.unparsable_share == 0.0
    assert (
        judge.votes_cast == 9
        and judge.unparsable_votes == 1
        and judge.unparsable_share == pytest.approx(1 / 9)
    )

    stats = LLMJudge(ScriptedBackend(REPLIES), m=3, unparsable=unparsable).statistics(
        [STEPS[:2], STEPS[2:]], [1, -1]
    )
    mu = p_plus + 2 / 3  # episode B, a failure: two of its three votes are -1
    assert stats["p_plus"] == pytest.approx(p_plus) and stats["p_minus"] == pytest.approx(2 / 3)
    assert stats["mu"] == pytest.approx(mu) and stats["precision_bound"] == pytest.approx(
        precision_bound(mu, 3)
    )
    assert stats["outcome_accuracy"] == 1.0 and stats["unparsable_share"] == pytest.approx(1 / 9)
    # errors: A predicts (1/3 + a2)/2 - 1 < 0 (under), B predicts -1/3 + 1 > 0 (over)
    assert stats["p_over"] == 0.5 and stats["p_under"] == 0.5 and stats["balance"] == 1.0
    assert stats["steps"] == 3.0


@pytest.mark.llm
def test_the_judge_reads_the_step_the_authors_way_and_samples_m_votes_at_0_8() -> None:
    seen: list[Any] = []

    class Recording(ScriptedBackend):
        def generate(self, prompts, n=1, temperature=1.0, max_new_tokens=256):
            seen.append((n, temperature))
            return super().generate(prompts, n, temperature, max_new_tokens)

    episode = TextEpisode("RLA-TextNav-v0", difficulty=0.0, seed=3)
    prompt = episode.reset()
    episode.step("I go. \\boxed{2}")
    backend = Recording(["\\boxed{1}"])
    votes = LLMJudge(backend).votes(episode.steps)
    assert votes.shape == (1, 3) and seen == [(3, 0.8)]
    system, user = backend.prompts[0]
    assert system["role"] == "system" and user["role"] == "user"
    text = user["content"]
    assert text.startswith(JUDGE_INSTRUCTION) and prompt in text and "\\boxed{2}" in text
    assert episode.steps[0].observation in text
    for criterion in (
        "(a) the chosen command suits",
        "(b) the reasoning is present",
        "(c) the chosen command is",
    ):
        assert criterion in text
    assert "1 or -1, in \\boxed{}" in JUDGE_INSTRUCTION


@pytest.mark.llm
def test_bad_judge_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="m must be an integer >= 1, got 0"):
        LLMJudge(ScriptedBackend(["x"]), m=0)
    with pytest.raises(ValueError, match="unparsable must be one of"):
        LLMJudge(ScriptedBackend(["x"]), unparsable="ignore")
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        ScriptedBackend(["x"]).generate(["p"], temperature=-1)
    with pytest.raises(ValueError, match="1 episodes but 2 outcomes"):
        LLMJudge(ScriptedBackend(["x"])).statistics([STEPS], [1, -1])


@pytest.mark.llm
def test_the_judge_drives_the_adaptive_difficulty_wrapper_on_a_text_env() -> None:
    env = gym.make("RLA-TextNav-v0", difficulty=0.3, obs_mode="text")
    backend = ScriptedBackend(["\\boxed{-1}"])
    judge = LLMJudge(backend, m=2)
    wrapped = AdaptiveDifficultyWrapper(
        env, interval=2, predict_outcome=judge.outcome_predictor(env.unwrapped.action_names)
    )
    for seed in range(2):
        _, info = wrapped.reset(seed=seed)
        done = False
        while not done:
            _, _, terminated, truncated, info = wrapped.step(int(np.flatnonzero(info["oracle_mask"])[0]))
            done = terminated or truncated
        assert info["rm_outcome_prediction"] == -1.0 and info["is_success"]
    # the judge saw the text observation and the command's name as the reply
    names = env.unwrapped.action_names
    reply = backend.prompts[0][1]["content"].split("Agent's reply:\n")[1].split("\n")[0]
    assert reply in names
    assert wrapped.curriculum.metrics()  # the curriculum read two predictions


# ---------------------------------------------------------------- the OpenAI-compatible backend


class _ChatStub(BaseHTTPRequestHandler):
    """A minimal /v1/chat/completions: answers ``\\boxed{1}`` to every choice, at most ``cap`` per call."""

    requests: list[dict[str, Any]]
    headers_seen: list[dict[str, str]]
    cap = 100

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/chat/completions":
            self.send_error(404, "no such route")
            return
        self.requests.append(body)
        self.headers_seen.append(dict(self.headers))
        n = min(body.get("n", 1), self.cap)
        content = (
            "I judge it fine. \\boxed{1}" if "judge" in body["messages"][-1]["content"] else "\\boxed{1}"
        )
        choices = [{"index": i, "message": {"role": "assistant", "content": content}} for i in range(n)]
        payload = json.dumps({"id": "stub", "object": "chat.completion", "choices": choices}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:  # keep the test output clean
        pass


@pytest.fixture
def chat_server() -> Iterator[tuple[str, type[_ChatStub]]]:
    handler = type("Handler", (_ChatStub,), {"requests": [], "headers_seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.llm
def test_openai_backend_round_trips_chat_completions_with_n_and_temperature(chat_server) -> None:
    url, handler = chat_server
    backend = OpenAIBackend(url, "tiny-judge", api_key="sk-test")
    judge = LLMJudge(backend, m=3)
    votes = judge.votes(STEPS)
    assert votes.tolist() == [[1, 1, 1]] * 3 and judge.unparsable_votes == 0
    assert len(handler.requests) == 3
    first = handler.requests[0]
    assert first["model"] == "tiny-judge" and first["n"] == 3 and first["temperature"] == 0.8
    assert first["max_tokens"] == 512 and [m["role"] for m in first["messages"]] == ["system", "user"]
    assert handler.headers_seen[0]["Authorization"] == "Bearer sk-test"
    # a plain string prompt becomes one user message
    assert backend.generate(["hello"], n=1, temperature=0.0) == [["\\boxed{1}"]]
    assert handler.requests[-1]["messages"] == [{"role": "user", "content": "hello"}]


@pytest.mark.llm
def test_openai_backend_asks_again_when_a_server_returns_fewer_choices(chat_server) -> None:
    url, handler = chat_server
    handler.cap = 1  # a server that ignores n
    replies = OpenAIBackend(url, "m").generate(["a", "b"], n=3)
    assert [len(r) for r in replies] == [3, 3] and len(handler.requests) == 6
    assert sorted(r["n"] for r in handler.requests) == [1, 1, 2, 2, 3, 3]


@pytest.mark.llm
def test_openai_backend_errors_name_the_server(chat_server) -> None:
    url, _ = chat_server
    with pytest.raises(ConnectionError, match="answered HTTP 404"):
        OpenAIBackend(url + "/wrong", "m").generate(["a"])
    with pytest.raises(ConnectionError, match="cannot reach"):
        OpenAIBackend("http://127.0.0.1:9/v1", "m", timeout=5).generate(["a"])
    with pytest.raises(ValueError, match="URL:MODEL"):
        OpenAIBackend.from_spec("localhost:8000")
    spec = OpenAIBackend.from_spec("http://localhost:8000/v1:org/model:8b")
    assert spec.url == "http://localhost:8000/v1/chat/completions" and spec.model == "org/model:8b"


@pytest.mark.llm
def test_an_llm_behind_a_server_is_evaluated_on_held_out_tasks(chat_server) -> None:
    url, handler = chat_server
    policy = policy_from_spec(f"openai:{url}:policy-model", temperature=0.7, max_new_tokens=32)
    rows = evaluate_llm(policy, "RLA-TextNav-v0", levels=(0.0,), episodes=2)
    assert rows[0]["policy"] == f"openai:{url}:policy-model" and rows[0]["invalid_replies"] == 0.0
    assert {r["temperature"] for r in handler.requests} == {0.7, 0.0}  # sampled, then greedy
    assert handler.requests[0]["messages"][0]["content"].startswith("You are playing a text game")


# ---------------------------------------------------------------- evaluation of LLM policies


@pytest.mark.llm
def test_llm_evaluation_runs_the_tasks_rla_eval_runs() -> None:
    seeds = heldout_seeds(6)
    for level in (0.0, 0.75):
        reference = evaluate(gym.make("RLA-TextNav-v0"), oracle_agent, level, seeds)
        text = evaluate_text_policy(ScriptedPolicy("oracle"), "RLA-TextNav-v0", level, seeds, batch=4)
        assert text.success_rate == 1.0 and text.invalid_share == 0.0
        assert text.mean_length == pytest.approx(
            reference.mean_optimal_len
        )  # the same tasks, solved optimally


@pytest.mark.llm
def test_unusable_llm_replies_are_counted_and_never_crash() -> None:
    policy = LLMPolicy(ScriptedBackend(["I refuse to choose."]), "stubborn")
    result = evaluate_text_policy(policy, "RLA-Household-v0", 0.5, heldout_seeds(3))
    assert result.success_rate == 0.0 and result.invalid_share == 1.0 and result.mean_length > 0


@pytest.mark.llm
def test_bad_policy_specs_are_refused() -> None:
    for spec in ("magic", "scripted:genius", "hf:", "openai:nowhere"):
        with pytest.raises(ValueError, match="scripted|URL:MODEL"):
            policy_from_spec(spec)


# ---------------------------------------------------------------- a tiny transformers model, offline


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offline tiny chat model of REFERENCE I (a BPE on the suite's text, a random Qwen2), saved."""
    pytest.importorskip("transformers")
    import torch

    from agents.llm.tiny import tiny_model, tiny_tokenizer

    torch.set_num_threads(1)
    tokenizer = tiny_tokenizer()
    path = tmp_path_factory.mktemp("tiny-llm")
    tiny_model(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.llm
def test_judge_smoke_on_a_random_tiny_model_counts_parse_failures(tiny_model_dir: Path) -> None:
    import torch

    torch.manual_seed(0)
    backend = TransformersBackend.from_pretrained(str(tiny_model_dir), device="cpu")
    rendered = backend.render(judge_messages(STEPS[0]))
    assert rendered.startswith("<|im_start|>system") and rendered.endswith("<|im_start|>assistant\n")
    episodes = []
    for seed in (3, 4):  # two short oracle episodes, judged together
        episode = TextEpisode("RLA-TextNav-v0", difficulty=0.0, seed=seed)
        episode.reset()
        while not episode.done:
            episode.step(episode.commands[int(np.flatnonzero(episode.info["oracle_mask"])[0])])
        episodes.append(episode)
    judge = LLMJudge(backend, m=3, max_new_tokens=24)
    stats = judge.statistics(episodes, [1, 1])
    steps = sum(len(e.steps) for e in episodes)
    assert stats["steps"] == steps and judge.votes_cast == 3 * steps
    assert stats["unparsable_share"] == pytest.approx(judge.unparsable_votes / judge.votes_cast)
    assert judge.unparsable_votes > 0  # a random model rarely writes a usable box
    votes = judge.votes(episodes[0].steps)
    assert votes.shape == (len(episodes[0].steps), 3) and set(votes.ravel()) <= {-1, 0, 1}
    greedy = backend.generate([judge_messages(STEPS[0])], n=3, temperature=0.0, max_new_tokens=8)
    assert len(greedy[0]) == 3 and len(set(greedy[0])) == 1  # greedy: one reply, repeated


# ---------------------------------------------------------------- one command, one table


@pytest.fixture(scope="module")
def sb3_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agents.train import TrainSettings, train

    out = tmp_path_factory.mktemp("runs") / "ppo"
    train(
        TrainSettings(
            algo="ppo", steps=512, out=str(out), n_envs=2, n_steps=256, eval_episodes=2, device="cpu"
        )
    )
    return out


@pytest.mark.llm
def test_one_command_puts_an_llm_and_an_sb3_policy_in_one_table(sb3_run: Path, capsys) -> None:
    from agents.cli import main
    from agents.evaluation import DENSE_LEVELS as EVAL_LEVELS  # rla eval's default grid

    assert main(["eval", "--run", str(sb3_run), "--episodes", "3", "--llm", "scripted:oracle"]) == 0
    out = capsys.readouterr().out
    run_line, *lines = out.splitlines()  # first the run it evaluates, then the table
    assert run_line.startswith(f"run {sb3_run}: RLA-TextNav-v0, algo ppo")
    assert lines[0].startswith("RLA-TextNav-v0: held-out success on 3 tasks")
    assert re.split(r"\s+", lines[1]) == [
        "policy",
        "difficulty",
        "stochastic",
        "greedy",
        "mean",
        "length",
        "invalid",
    ]
    sb3 = [line for line in lines if line.startswith(f"ppo: {sb3_run}")]
    llm = [line for line in lines if line.startswith("scripted:oracle")]
    assert len(sb3) == len(llm) == len(EVAL_LEVELS) and len(lines) == 2 + 2 * len(EVAL_LEVELS)
    assert all(line.split()[-1] == "-" for line in sb3) and all(line.endswith("0.00/0.00") for line in llm)
    assert [float(line.split()[1]) for line in llm] == list(EVAL_LEVELS)
    assert all(float(line.split()[2]) == 1.0 for line in llm)  # the oracle solves every held-out task


@pytest.mark.llm
def test_one_command_evaluates_a_tiny_transformers_model_next_to_the_run(
    sb3_run: Path, tiny_model_dir: Path, capsys
) -> None:
    from agents.cli import EvalSettings, eval_command

    levels = (0.0, 0.25, 0.5, 0.75, 1.0)
    rows = eval_command(
        EvalSettings(
            run=str(sb3_run), episodes=1, levels=levels, llm=(f"hf:{tiny_model_dir}",), llm_max_new_tokens=8
        )
    )
    policies = [row["policy"] for row in rows]
    assert policies.count(f"hf:{tiny_model_dir}") == 5 and policies.count(f"ppo: {sb3_run}") == 5
    for row in rows:
        assert row["mean_length"] > 0
        if row["policy"].startswith("hf:"):
            assert row["invalid_replies_greedy"] > 0  # a random model's replies: counted, never raised
    assert f"hf:{tiny_model_dir}" in capsys.readouterr().out


# ---------------------------------------------------------------- the docs page and the GPU check


def test_the_llm_judge_page_examples_run(capsys) -> None:
    page = (ROOT / "docs" / "llm-judge.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) >= 2
    namespace: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, "llm-judge.md", "exec"), namespace)
    assert namespace["votes"].shape == (len(namespace["episode"].steps), 3)
    assert namespace["stats"]["unparsable_share"] == pytest.approx(1 / 3)
    assert namespace["rows"][0]["success"] == 1.0


def test_the_gpu_check_skips_cleanly_without_a_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the check would run, not skip")
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "llm_gpu_check.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "skipped: no CUDA device" in result.stdout
