"""`python -m xpgym eval` and `xpgym.eval`: real HTTP servers, a local tiny model, resume,
failures, multi-agent envs, and the files the run promises."""

from __future__ import annotations

import json
import logging
import re
import shlex
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_servers import ChatServer, FakeLLM, FakeSamplingParams, Reply, completion
from hang_guard import HANG_GUARD_S

from xpgym.__main__ import main
from xpgym.core import registry as reg
from xpgym.core.trajectory import Episode
from xpgym.eval.models import parse_model_spec
from xpgym.eval.policy_adapters import BatchingPolicy
from xpgym.eval.records import load_records
from xpgym.eval.report import format_table
from xpgym.eval.runner import EvalConfig, Evaluation, resolve_env_ids, run_eval
from xpgym.rollout.policies import Generation, PolicyError

EASY = "game:GuessTheNumber-v0-easy"  # 1..10 in 4 turns: binary search always wins
TICTACTOE = "multiagent:TicTacToe-v0"


@pytest.fixture
def chat_server() -> Iterator[Callable[[Callable[[dict, int], Reply]], ChatServer]]:
    """Starts OpenAI chat completions servers on 127.0.0.1; closes them after the test."""
    servers: list[ChatServer] = []

    def start(responder: Callable[[dict, int], Reply]) -> ChatServer:
        servers.append(ChatServer(responder))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def spec_of(server: ChatServer) -> str:
    return f"{server.url}#served-model"


def config(tmp_path: Path, model: str | None, **overrides: Any) -> EvalConfig:
    settings: dict[str, Any] = {
        "envs": [EASY],
        "out": tmp_path / "run",
        "model": model,
        "episodes": 2,
        "concurrency": 1,
        "timeout": 5.0,
        "max_retries": 2,
        "retry_backoff": 0.001,
    }
    return EvalConfig(**{**settings, **overrides})


def binary_search(messages: list[dict]) -> str:
    """The GuessTheNumber move that halves the interval the conversation leaves open."""
    low, high = map(int, re.search(r"from (\d+) to (\d+)", messages[0]["content"]).groups())
    for message in messages:
        hint = re.search(r"number is (higher|lower) than (\d+)", message["content"])
        if message["role"] == "user" and hint:
            guess = int(hint[2])
            low, high = (guess + 1, high) if hint[1] == "higher" else (low, guess - 1)
    return f"\\boxed{{{(low + high) // 2}}}"


def searching(body: dict, n: int) -> Reply:
    return Reply(body=completion(binary_search(body["messages"])))


def turns_of(record: dict) -> list[str]:
    return [turn["action"] for turn in record["episode"]["turns"]]


# -- single-agent runs over HTTP ------------------------------------------------------------


def test_a_binary_search_server_wins_every_episode(tmp_path, chat_server):
    server = chat_server(searching)
    summary = run_eval(config(tmp_path, spec_of(server), episodes=3))
    records = load_records(tmp_path / "run" / "episodes.jsonl")
    assert sorted(records) == [(EASY, 0, 0), (EASY, 1, 0), (EASY, 2, 0)]
    turns = [len(turns_of(r)) for r in records.values()]
    assert all(1 <= t <= 4 for t in turns)  # floor(log2(10)) + 1 guesses at most
    assert len(server.requests) == sum(turns)  # one request per turn
    assert all(body["model"] == "served-model" for _, _, body in server.requests)
    (row,) = summary.rows
    assert (row.success_rate, row.mean_return, row.invalid_action_rate) == (1.0, 1.0, 0.0)
    assert row.mean_turns == sum(turns) / 3
    assert row.mean_tokens is None  # a chat API returns no token ids
    assert row.pass_at_k == {"1": 1.0}
    assert (summary.planned, summary.completed, summary.failed) == (3, 3, 0)


def test_out_of_range_answers_earn_the_documented_penalty_every_turn(tmp_path, chat_server):
    server = chat_server(lambda body, n: Reply(body=completion("\\boxed{0}")))
    (row,) = run_eval(config(tmp_path, spec_of(server))).rows
    # GuessTheNumber: an integer outside 1..10 is invalid, -0.1, and 4 turns end the game.
    assert (row.success_rate, row.mean_turns, row.invalid_action_rate) == (0.0, 4.0, 1.0)
    assert row.mean_return == pytest.approx(-0.4)
    for record in load_records(tmp_path / "run" / "episodes.jsonl").values():
        assert record["episode"]["turns"][-1]["truncated"] is True


def test_pass_at_k_credits_a_seed_solved_by_any_of_its_samples(tmp_path, chat_server):
    lock = threading.Lock()
    conversations = []

    def responder(body: dict, n: int) -> Reply:
        """Even-numbered conversations search, odd ones answer out of range."""
        messages = body["messages"]
        if len(messages) == 1:
            with lock:
                conversations.append(len(conversations) % 2 == 0)
            good = conversations[-1]
        else:
            good = messages[1]["content"] != "\\boxed{0}"
        return Reply(body=completion(binary_search(messages) if good else "\\boxed{0}"))

    server = chat_server(responder)
    summary = run_eval(config(tmp_path, spec_of(server), samples=2, temperature=1.0))
    (row,) = summary.rows
    # One worker plays keys in plan order: sample 0 of each seed searches, sample 1 does not.
    assert row.success_rate == 0.5
    assert row.pass_at_k == {"1": 0.5, "2": 1.0}
    records = load_records(tmp_path / "run" / "episodes.jsonl")
    assert [records[EASY, s, k]["results"][0]["success"] for s in (0, 1) for k in (0, 1)] == [
        True,
        False,
        True,
        False,
    ]


def test_samples_of_a_seed_start_from_the_same_state(tmp_path, chat_server):
    server = chat_server(searching)
    run_eval(config(tmp_path, spec_of(server), episodes=1, samples=3, temperature=1.0))
    records = load_records(tmp_path / "run" / "episodes.jsonl").values()
    episodes = [Episode.from_dict(r["episode"]) for r in records]
    assert len({e.seed for e in episodes}) == 1
    assert len({tuple(t.action for t in e.turns) for e in episodes}) == 1  # same target


def test_requests_of_different_episodes_run_concurrently(tmp_path, chat_server):
    lock = threading.Lock()
    state = {"in_flight": 0, "most": 0}
    another_arrived = threading.Event()

    def responder(body: dict, n: int) -> Reply:
        with lock:
            state["in_flight"] += 1
            state["most"] = max(state["most"], state["in_flight"])
        if n == 0:  # the first request is answered only once another one has arrived
            another_arrived.wait(HANG_GUARD_S)
        else:
            another_arrived.set()
        with lock:
            state["in_flight"] -= 1
        return searching(body, n)

    server = chat_server(responder)
    run_eval(config(tmp_path, spec_of(server), episodes=4, concurrency=4))
    records = load_records(tmp_path / "run" / "episodes.jsonl").values()
    assert len(server.requests) == sum(len(turns_of(r)) for r in records)  # no retry overlapped
    assert state["most"] > 1


# -- failures -------------------------------------------------------------------------------


def test_server_errors_and_timeouts_are_retried_and_the_episode_completes(tmp_path, chat_server):
    retried = threading.Event()

    def responder(body: dict, n: int) -> Reply:
        if n == 0:
            return Reply(status=500, body={"error": "boom"})
        if n == 1:  # held until the client has given up on it and retried: a timeout
            retried.wait(HANG_GUARD_S)
            return Reply(body=completion("\\boxed{5}"))
        retried.set()
        return searching(body, n)

    server = chat_server(responder)
    # 2 s: generous for the answered requests on a busy machine; the held one never answers
    summary = run_eval(config(tmp_path, spec_of(server), episodes=1, timeout=2.0, max_retries=3))
    (record,) = load_records(tmp_path / "run" / "episodes.jsonl").values()
    assert record["status"] == "ok"
    assert summary.rows[0].success_rate == 1.0
    assert len(server.requests) == 2 + len(turns_of(record))  # two failed attempts, retried


def test_persistent_http_errors_become_failed_records_not_crashes(tmp_path, chat_server):
    server = chat_server(lambda body, n: Reply(status=503, body={"error": "overloaded"}))
    summary = run_eval(config(tmp_path, spec_of(server), max_retries=1))
    records = load_records(tmp_path / "run" / "episodes.jsonl")
    assert [r["status"] for r in records.values()] == ["failed", "failed"]
    for record in records.values():
        assert "after 2 attempts" in record["error"]
        assert "HTTP 503" in record["error"]
        assert record["results"] == []
    assert len(server.requests) == 4  # 2 episodes x (1 attempt + 1 retry)
    assert (summary.completed, summary.failed) == (0, 2)
    assert summary.rows[0].success_rate is None


def test_a_malformed_response_fails_its_episode_and_retry_failed_reruns_only_it(
    tmp_path, chat_server
):
    def responder(body: dict, n: int) -> Reply:  # episode 0's first request, every retry
        return Reply(body=b"<html>not json</html>") if n < 3 else searching(body, n)

    server = chat_server(responder)
    run_eval(config(tmp_path, spec_of(server)))
    records = load_records(tmp_path / "run" / "episodes.jsonl")
    assert records[EASY, 0, 0]["status"] == "failed"
    assert "malformed response" in records[EASY, 0, 0]["error"]
    assert records[EASY, 1, 0]["status"] == "ok"

    assert Evaluation(config(tmp_path, spec_of(server))).pending == []  # failed is finished
    before = len(server.requests)
    summary = run_eval(config(tmp_path, spec_of(server), retry_failed=True))
    records = load_records(tmp_path / "run" / "episodes.jsonl")
    assert records[EASY, 0, 0]["status"] == "ok"
    assert len(server.requests) - before == len(turns_of(records[EASY, 0, 0]))
    assert (summary.completed, summary.failed) == (2, 0)
    lines = (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 3  # the failed record stays; the retried one after it wins


def test_an_env_that_crashes_mid_episode_gives_an_infra_error_record(tmp_path, chat_server, toy_id):
    server = chat_server(lambda body, n: Reply(body=completion("raise")))  # ToyEnv raises
    run_eval(config(tmp_path, spec_of(server), envs=[toy_id], episodes=1))
    (record,) = load_records(tmp_path / "run" / "episodes.jsonl").values()
    assert record["status"] == "infra_error"
    assert record["error"] == "sub_env_crash: RuntimeError: toy failure"
    assert record["infra_error"]["kind"] == "sub_env_crash"
    assert record["results"] == []
    assert Episode.from_dict(record["episode"]).outcome == "infra_error"


def test_infra_errors_are_reported_apart_from_failures(tmp_path, chat_server, toy_id):
    server = chat_server(lambda body, n: Reply(body=completion("raise")))
    summary = run_eval(config(tmp_path, spec_of(server), envs=[toy_id], episodes=2))
    assert (summary.completed, summary.failed, summary.infra_errors) == (0, 0, 2)
    assert summary.infra_errors_by_kind == {"sub_env_crash": 2}
    (row,) = summary.rows
    assert (row.failed, row.infra_errors, row.success_rate) == (0, 2, None)
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["episodes"]["infra_errors"] == 2
    assert saved["episodes"]["infra_errors_by_kind"] == {"sub_env_crash": 2}
    header, line = format_table(summary.rows).splitlines()
    columns = dict(zip(header.split(), line.split(), strict=False))
    assert (columns["FAILED"], columns["INFRA"]) == ("0", "2")


def test_reward_function_metrics_are_averaged_into_the_summary(tmp_path, chat_server):
    saved = dict(reg.registry)
    reg.register("test:Rewarded-v0", "toy_envs:rewarded_toy_env", episode_length=2)
    try:
        server = chat_server(lambda body, n: Reply(body=completion("abc")))
        summary = run_eval(config(tmp_path, spec_of(server), envs=["test:Rewarded-v0"], episodes=2))
    finally:
        reg.registry.clear()
        reg.registry.update(saved)
    (row,) = summary.rows
    assert row.metrics == {"action_chars": 0.0, "action_chars/chars": 3.0}
    (saved_row,) = json.loads((tmp_path / "run" / "summary.json").read_text())["rows"]
    assert saved_row["metrics"] == row.metrics


# -- resume ---------------------------------------------------------------------------------


def test_rerunning_skips_finished_episodes_and_more_seeds_extend_the_run(tmp_path, chat_server):
    server = chat_server(searching)
    run_eval(config(tmp_path, spec_of(server)))
    first = len(server.requests)
    again = Evaluation(config(tmp_path, spec_of(server)))
    assert again.pending == []
    again.run()
    assert len(server.requests) == first  # nothing was asked again

    extended = Evaluation(config(tmp_path, spec_of(server), episodes=3))
    assert extended.pending == [(EASY, 2, 0)]
    extended.run()
    summary = extended.summarize()
    records = load_records(tmp_path / "run" / "episodes.jsonl")
    assert len(server.requests) - first == len(turns_of(records[EASY, 2, 0]))
    assert (summary.planned, summary.completed) == (3, 3)


def test_a_record_torn_by_a_kill_is_skipped_and_its_episode_rerun(tmp_path, chat_server, caplog):
    server = chat_server(searching)
    run_eval(config(tmp_path, spec_of(server)))
    path = tmp_path / "run" / "episodes.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[1][:40])  # the last write was cut short
    evaluation = Evaluation(config(tmp_path, spec_of(server)))
    assert "skipping an unreadable record" in caplog.text
    assert evaluation.pending == [(EASY, 1, 0)]
    evaluation.run()
    assert set(load_records(path)) == {(EASY, 0, 0), (EASY, 1, 0)}
    assert path.read_text().splitlines()[2].startswith('{"env_id"')  # on a line of its own


def test_resuming_with_other_settings_is_refused(tmp_path, chat_server):
    server = chat_server(searching)
    run_eval(config(tmp_path, spec_of(server)))
    with pytest.raises(ValueError, match=r"other settings \(temperature: 0.0 there, 0.7 now\)"):
        Evaluation(config(tmp_path, spec_of(server), temperature=0.7))


# -- secrets --------------------------------------------------------------------------------


def test_the_api_key_never_reaches_logs_errors_output_or_files(
    tmp_path, chat_server, monkeypatch, caplog, capsys
):
    secret = "sk-eval-secret-4242"
    monkeypatch.setenv("XPGYM_EVAL_KEY", secret)

    def echo(body: dict, n: int) -> Reply:
        """Echoes the Authorization header in errors: a 500 (retried), later a 401 (fatal)."""
        headers = server.requests[n][1]
        if n == 0:
            return Reply(status=500, body={"error": f"bad gateway for {headers['Authorization']}"})
        if len(body["messages"]) == 1 and n > 1:
            return Reply(status=401, body={"error": f"invalid key {headers['Authorization']}"})
        return searching(body, n)

    server = chat_server(echo)
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "run"
    argv = ["eval", "--env", EASY, "--model", spec_of(server), "--episodes", "2"]
    argv += ["--out", str(out), "--api-key-env", "XPGYM_EVAL_KEY", "--concurrency", "1"]
    argv += ["--retry-backoff", "0.001"]
    assert main(argv) == 1  # the second episode failed
    assert server.requests[0][1]["Authorization"] == f"Bearer {secret}"  # the key was used
    records = load_records(out / "episodes.jsonl")
    assert "HTTP 401" in records[EASY, 1, 0]["error"]
    assert "***" in records[EASY, 1, 0]["error"]  # masked, not just absent
    assert "***" in caplog.text  # the HTTP client's retry warning, masked
    captured = capsys.readouterr()
    texts = [caplog.text, captured.out, captured.err]
    texts += [path.read_text() for path in out.iterdir() if path.suffix in (".json", ".jsonl")]
    for text in texts:
        assert secret not in text


def test_model_urls_with_credentials_or_no_served_model_are_refused():
    with pytest.raises(ValueError, match="user name, password or query"):
        parse_model_spec("https://user:sk-123@api.example.com/v1#gpt")
    with pytest.raises(ValueError, match="user name, password or query"):
        parse_model_spec("https://api.example.com/v1?key=sk-123#gpt")
    with pytest.raises(ValueError, match="name the served model"):
        parse_model_spec("http://127.0.0.1:8000/v1")


def test_model_specs_map_to_backends():
    url = parse_model_spec("http://127.0.0.1:8000/v1#Qwen/Qwen2.5-0.5B-Instruct")
    assert (url.kind, url.target, url.served_model) == (
        "openai",
        "http://127.0.0.1:8000/v1",
        "Qwen/Qwen2.5-0.5B-Instruct",
    )
    assert (parse_model_spec("vllm:/models/q").kind, parse_model_spec("vllm:/models/q").target) == (
        "vllm",
        "/models/q",
    )
    assert parse_model_spec("random").kind == parse_model_spec("scripted").kind == "env"
    assert parse_model_spec("./checkpoints/step-100").kind == "hf"
    with pytest.raises(ValueError, match="vllm:"):
        parse_model_spec("vllm:")


# -- local transformers models --------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny offline model and tokenizer, saved with `save_pretrained` (real loader path)."""
    random_byte_lm = pytest.importorskip("random_byte_lm", reason="needs torch and transformers")
    path = tmp_path_factory.mktemp("tiny-model")
    random_byte_lm.tiny_model(seed=0).save_pretrained(path)
    random_byte_lm.tiny_tokenizer().save_pretrained(path)
    return path


def test_a_local_model_directory_runs_end_to_end_from_the_command_line(
    tmp_path, tiny_model_dir, capsys
):
    out = tmp_path / "run"
    argv = ["eval", "--env", EASY, "--model", str(tiny_model_dir), "--episodes", "2"]
    argv += ["--samples", "2", "--temperature", "1.0", "--max-new-tokens", "6"]
    argv += ["--concurrency", "2", "--out", str(out)]
    assert main(argv) == 0
    records = load_records(out / "episodes.jsonl")
    assert len(records) == 4
    for record in records.values():
        (result,) = record["results"]
        episode = Episode.from_dict(record["episode"])  # the transcript loads back
        assert result["turns"] == len(episode.turns) >= 1
        assert 1 <= result["tokens"] <= 6 * result["turns"]  # the tokenizer's ids were counted
        assert len(result["generation_seconds"]) == result["turns"]
        assert all(turn.prompt_ids is None for turn in episode.turns)  # ids are not stored
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["model"] == str(tiny_model_dir)
    assert summary["config"]["command"] == ["xpgym", *argv]
    assert summary["versions"]["transformers"]
    assert summary["episodes"] == {
        "planned": 4,
        "completed": 4,
        "failed": 0,
        "infra_errors": 0,
        "infra_errors_by_kind": {},
    }
    (row,) = summary["rows"]
    assert row["mean_tokens"] == sum(r["results"][0]["tokens"] for r in records.values()) / 4
    assert set(row["pass_at_k"]) == {"1", "2"}
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["ENV", "AGENT", "MODEL"]
    assert table[1].split()[:4] == [EASY, "-", str(tiny_model_dir), "4/4"]


def test_a_server_backed_by_the_tiny_model_plays_its_replies(tmp_path, chat_server, tiny_model_dir):
    from xpgym.rollout.policies.hf import HFPolicy

    model = HFPolicy.from_pretrained(str(tiny_model_dir), device="cpu", max_new_tokens=5)
    replies: list[str] = []

    def generate(body: dict, n: int) -> Reply:
        (generation,) = model.generate([body["messages"]])
        replies.append(generation.text)
        return Reply(body=completion(generation.text, generation.finish_reason))

    server = chat_server(generate)
    run_eval(config(tmp_path, spec_of(server), temperature=1.0))
    records = load_records(tmp_path / "run" / "episodes.jsonl")
    assert [a for key in sorted(records) for a in turns_of(records[key])] == replies


def test_a_vllm_spec_runs_through_the_vllm_policy(tmp_path, monkeypatch):
    random_byte_lm = pytest.importorskip("random_byte_lm", reason="needs torch and transformers")
    engines = []

    def engine(model: str) -> FakeLLM:
        engines.append(model)
        return FakeLLM(random_byte_lm.tiny_tokenizer())

    fake = types.SimpleNamespace(LLM=engine, SamplingParams=FakeSamplingParams)
    gpu = types.SimpleNamespace(current_platform=types.SimpleNamespace(is_cpu=lambda: False))
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setitem(sys.modules, "vllm.platforms", gpu)  # vLLM sizes its own KV cache
    summary = run_eval(config(tmp_path, "vllm:/models/fake", episodes=1))
    (record,) = load_records(tmp_path / "run" / "episodes.jsonl").values()
    assert engines == ["/models/fake"]
    assert set(turns_of(record)) == {"ab"}  # FakeLLM's first completion of every batch
    assert record["results"][0]["tokens"] == 3 * len(turns_of(record))  # a, b and the EOS id
    assert summary.rows[0].invalid_action_rate == 1.0


# -- multi-agent envs -----------------------------------------------------------------------


def test_tic_tac_toe_agents_play_their_own_models(tmp_path, chat_server):
    server = chat_server(lambda body, n: Reply(body=completion("\\boxed{1 1}")))
    cfg = config(
        tmp_path, None, envs=[TICTACTOE], agent_models={"x": spec_of(server), "o": "random"}
    )
    rows = run_eval(cfg).rows
    (record, _) = load_records(tmp_path / "run" / "episodes.jsonl").values()
    # x takes the top-left corner (1 1), o moves at random, x plays 1 1 again: taken, so
    # x forfeits (illegal move: x -1, o +1).
    steps = record["transcript"]["steps"]
    assert [list(step["actions"]) for step in steps] == [["x"], ["o"], ["x"]]
    assert steps[-1]["infos"]["x"]["reason"] == "illegal_move"
    x, o = record["results"]
    assert (x["agent"], x["return"], x["turns"], x["invalid_actions"], x["success"]) == (
        "x",
        -1.0,
        2,
        1,
        False,
    )
    assert (o["agent"], o["return"], o["turns"], o["invalid_actions"], o["success"]) == (
        "o",
        1.0,
        1,
        0,
        True,
    )
    assert [(r.agent, r.model, r.success_rate) for r in rows] == [
        ("x", spec_of(server), 0.0),
        ("o", "random", 1.0),
    ]
    first, second = (body["messages"] for _, _, body in server.requests[:2])  # x, episode 1
    assert [m["role"] for m in first] == ["user"]
    assert "Board:" in first[0]["content"]  # x saw its observation
    assert [m["role"] for m in second] == ["user", "assistant", "user"]  # and its history
    assert second[:2] == [*first, {"role": "assistant", "content": "\\boxed{1 1}"}]
    assert "Last move: 'o' played" in second[2]["content"]


def test_customer_service_with_a_scripted_user(tmp_path, chat_server):
    if "multiagent:CustomerService-v0" not in reg.registry:
        pytest.skip("multiagent:CustomerService-v0 is not registered")
    server = chat_server(lambda body, n: Reply(body=completion("Sorry, I cannot help.")))
    cfg = config(
        tmp_path,
        None,
        envs=["multiagent:CustomerService-v0"],
        agent_models={"user": "scripted", "assistant": spec_of(server)},
        episodes=1,
        max_turns=6,
    )
    rows = run_eval(cfg).rows
    (record,) = load_records(tmp_path / "run" / "episodes.jsonl").values()
    assert record["status"] == "ok"
    steps = record["transcript"]["steps"]
    assert list(steps[0]["actions"]) == ["user"]  # the user speaks first
    assert steps[1]["actions"] == {"assistant": "Sorry, I cannot help."}
    first_request = server.requests[0][2]["messages"]
    assert f"User: {steps[0]['actions']['user']}" in first_request[-1]["content"]
    assert [(r.agent, r.model) for r in rows] == [
        ("user", "scripted"),
        ("assistant", spec_of(server)),
    ]


def test_tiny_model_self_play_and_random_rock_paper_scissors(tmp_path, tiny_model_dir):
    cfg = config(
        tmp_path,
        str(tiny_model_dir),
        envs=[TICTACTOE, "multiagent:RockPaperScissors-v0"],
        agent_models={"player_0": "random", "player_1": "random"},
        max_new_tokens=6,
        concurrency=2,
    )
    summary = run_eval(cfg)
    assert [(r.env_id, r.agent) for r in summary.rows] == [
        (TICTACTOE, "x"),
        (TICTACTOE, "o"),
        ("multiagent:RockPaperScissors-v0", "player_0"),
        ("multiagent:RockPaperScissors-v0", "player_1"),
    ]
    for record in load_records(tmp_path / "run" / "episodes.jsonl").values():
        assert record["status"] == "ok"
        first, second = record["results"]
        assert first["return"] + second["return"] == 0  # both games are zero-sum
        if record["env_id"] == TICTACTOE:
            assert first["turns"] in (second["turns"], second["turns"] + 1)  # x moves first
            assert first["tokens"] >= 1  # the local model's ids are counted
        else:
            assert first["turns"] == second["turns"] == 5  # 5 simultaneous rounds


def test_max_turns_truncates_a_multi_agent_episode(tmp_path):
    run_eval(config(tmp_path, "random", envs=[TICTACTOE], max_turns=2, episodes=1))
    (record,) = load_records(tmp_path / "run" / "episodes.jsonl").values()
    assert len(record["transcript"]["steps"]) == 2
    assert record["transcript"]["truncated_reason"] == "max_turns"


def test_every_agent_needs_a_model_and_agent_ids_must_exist(tmp_path):
    with pytest.raises(ValueError, match="agent 'o' of 'multiagent:TicTacToe-v0' has no model"):
        Evaluation(config(tmp_path, None, envs=[TICTACTOE], agent_models={"x": "random"}))
    with pytest.raises(ValueError, match=r"names agents \['y'\]"):
        Evaluation(config(tmp_path, "random", envs=[TICTACTOE], agent_models={"y": "random"}))
    with pytest.raises(ValueError, match="single-agent env: pass --model"):
        Evaluation(config(tmp_path, None))


# -- env selection, CLI errors, warnings ----------------------------------------------------


@pytest.fixture
def toy_id() -> Iterator[str]:
    """A registered single-agent toy env (`toy_envs.ToyEnv`); the registry is restored."""
    saved = dict(reg.registry)
    reg.register("test:Toy-v0", "toy_envs:ToyEnv")
    reg.register("test:Toy-v0-download", "toy_envs:ToyEnv", requires_download=True)
    yield "test:Toy-v0"
    reg.registry.clear()
    reg.registry.update(saved)


def test_globs_match_in_order_without_repeats_and_skip_downloads(toy_id, caplog):
    ids = resolve_env_ids(["test:Toy-*", "game:GuessTheNumber-v0-[eh]*", "test:Toy-v0"])
    assert ids == [toy_id, EASY, "game:GuessTheNumber-v0-hard"]
    assert "skipping 1 ids that download data" in caplog.text
    assert "test:Toy-v0-download" in resolve_env_ids(["test:Toy-*"], allow_download=True)


def test_an_exact_id_that_downloads_needs_allow_download(toy_id):
    with pytest.raises(ValueError, match="--allow-download"):
        resolve_env_ids(["test:Toy-v0-download"])
    assert resolve_env_ids(["test:Toy-v0-download"], allow_download=True) == [
        "test:Toy-v0-download"
    ]


def test_cli_reports_bad_settings_with_exit_status_2(tmp_path, capsys):
    assert main(["eval", "--env", "game:NoSuch-v0", "--model", "random", "--out", "x"]) == 2
    assert "unknown env id 'game:NoSuch-v0'" in capsys.readouterr().err
    assert main(["eval", "--env", "game:Nothing*", "--model", "random", "--out", "x"]) == 2
    assert "no env ids match" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "--env", EASY, "--agent-model", "x:random"])
    assert "expected AGENT=SPEC" in capsys.readouterr().err


def test_several_samples_at_temperature_zero_warn(tmp_path, chat_server, caplog):
    Evaluation(config(tmp_path, spec_of(chat_server(searching)), samples=2))
    assert "greedy samples are (nearly) identical" in caplog.text


def test_the_table_shows_unknown_values_as_dashes(tmp_path):
    summary = run_eval(config(tmp_path, "random", episodes=1))
    header, line = format_table(summary.rows).splitlines()
    assert header.split() == [
        "ENV",
        "AGENT",
        "MODEL",
        "DONE",
        "FAILED",
        "INFRA",
        "SUCCESS",
        "RETURN",
        "TURNS",
        "INVALID",
        "TOKENS",
        "PASS@1",
    ]
    assert line.split()[:6] == [EASY, "-", "random", "1/1", "0", "0"]
    assert line.split()[10] == "-"  # the random baseline has no tokens


def test_importing_the_eval_package_imports_nothing_heavy():
    code = (
        "import sys, xpgym.eval, xpgym.eval.runner\n"
        "heavy = [m for m in ('torch', 'transformers', 'vllm', 'matplotlib', 'tqdm')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- BatchingPolicy -------------------------------------------------------------------------


class GatedEcho:
    """A batched policy that records its batch sizes; "fail" in a batch makes it raise.

    While `gate` is closed (cleared), ``generate`` sets `busy` and waits for the gate: a test
    queues more requests behind a batch that is provably in progress, then opens the gate.
    """

    tokenizer = None

    def __init__(self, answers: int | None = None) -> None:
        self.batches: list[int] = []
        self.answers = answers
        self.gate = threading.Event()
        self.gate.set()
        self.busy = threading.Event()

    def generate(self, prompts):
        self.batches.append(len(prompts))
        self.busy.set()
        self.gate.wait(HANG_GUARD_S)
        if "fail" in prompts:
            raise RuntimeError("model crashed")
        return [Generation(text=f"re:{p}") for p in prompts[: self.answers]]


def test_batching_policy_gathers_concurrent_requests_into_batches():
    inner = GatedEcho()
    inner.gate.clear()
    policy = BatchingPolicy(inner, max_batch=4)
    try:
        futures = [policy.submit("p0")]
        assert inner.busy.wait(HANG_GUARD_S)  # p0's batch is being generated
        futures += [policy.submit(f"p{i}") for i in range(1, 8)]  # they queue up meanwhile
        inner.gate.set()
        texts = [future.result(HANG_GUARD_S).text for future in futures]
    finally:
        policy.close()
    assert texts == [f"re:p{i}" for i in range(8)]
    assert sum(inner.batches) == 8
    assert max(inner.batches) > 1
    assert max(inner.batches) <= 4


def test_batching_policy_fails_every_request_of_a_failed_batch_and_goes_on():
    inner = GatedEcho()
    inner.gate.clear()
    policy = BatchingPolicy(inner, max_batch=2)
    try:
        held = policy.submit("held")
        assert inner.busy.wait(HANG_GUARD_S)  # the next two queue up behind this batch
        futures = [policy.submit("fail"), policy.submit("ok")]
        inner.gate.set()
        assert held.result(HANG_GUARD_S).text == "re:held"
        for future in futures:
            with pytest.raises(RuntimeError, match="model crashed"):
                future.result(HANG_GUARD_S)
        assert policy.submit("later").result(HANG_GUARD_S).text == "re:later"
    finally:
        policy.close()


def test_batching_policy_reports_a_wrong_number_of_generations():
    policy = BatchingPolicy(GatedEcho(answers=0), max_batch=1)
    try:
        with pytest.raises(PolicyError, match="answered 1 prompts"):
            policy.submit("a").result(HANG_GUARD_S)
    finally:
        policy.close()


# -- docs/eval.md ---------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "eval.md"


def test_the_docs_quick_start_command_and_python_example_run(tmp_path, monkeypatch, capsys):
    text = DOCS.read_text(encoding="utf-8")
    command = re.search(r"```bash\n(python -m xpgym eval .*?)\n```", text, re.DOTALL)[1]
    argv = shlex.split(command.replace("\\\n", " "))
    monkeypatch.chdir(tmp_path)
    assert argv[:3] == ["python", "-m", "xpgym"]
    assert main(argv[3:]) == 0
    assert (tmp_path / "results/eval/random-guess/summary.png").exists()
    example = re.search(r"```python\n(.*?)```", text, re.DOTALL)[1]
    exec(compile(example, str(DOCS), "exec"), {})
    assert "multiagent:TicTacToe-v0 o" in capsys.readouterr().out


def test_cli_reports_a_model_that_does_not_load_with_exit_status_2(tmp_path, capsys, monkeypatch):
    pytest.importorskip("transformers", reason="the HF loader needs transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never reach for the hub
    argv = ["eval", "--env", EASY, "--model", str(tmp_path / "no-model"), "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "xpgym eval: error:" in capsys.readouterr().err
