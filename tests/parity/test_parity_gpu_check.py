"""The prepared GPU check (`parity.curves.gpu_check`) on CPU: it picks CUDA when there is one
and refuses clearly when not, its arguments, and the shape of the JSON it writes (its parts
stood in; the parts themselves run only on a GPU)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from parity.curves import gpu_check
from parity.curves.gpu_check import CheckConfig, NoCudaError, check, main, pick_device
from parity.shared.trainer_code import NotRunnableError


def test_cuda_is_picked_when_there_is_a_device() -> None:
    assert pick_device(cuda_available=True) == "cuda"


def test_without_cuda_the_plan_is_refused_with_where_to_run_instead() -> None:
    with pytest.raises(NoCudaError, match=r"no CUDA device.*python -m parity.update"):
        pick_device(cuda_available=False)


def test_the_command_line_exits_2_without_cuda_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "check.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["--out", str(out)])
    assert exit_info.value.code == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv", [["--parts", "vllm"], ["--layer3-steps", "0"], ["--demo-budget-s", "-1"]]
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2


def _stand_in_parts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, CheckConfig]]:
    calls: list[tuple[str, CheckConfig]] = []

    def ok(device: str, cfg: CheckConfig) -> dict[str, Any]:
        calls.append((device, cfg))
        return {"ok": True, "steps_trained": 7}

    def missing(device: str, cfg: CheckConfig) -> dict[str, Any]:
        raise NotRunnableError("trl is not installed")

    def crashes(device: str, cfg: CheckConfig) -> dict[str, Any]:
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(gpu_check, "PARTS", {"demo": ok, "layer3": crashes, "trl_e2e": missing})
    monkeypatch.setattr(gpu_check, "_reset_peak", lambda: None)
    monkeypatch.setattr(gpu_check, "_peak_gib", lambda: 1.5)
    monkeypatch.setattr(gpu_check, "_describe", lambda device: {"device": device, "name": "X"})
    return calls


def test_the_report_names_each_parts_status_time_and_peak_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _stand_in_parts(monkeypatch)
    cfg = CheckConfig(parts=("demo", "layer3", "trl_e2e"), out_dir=tmp_path)
    report = check(cfg, "cuda")
    assert calls == [("cuda", cfg)]
    assert set(report) == {"device", "versions", "config", "parts"}
    parts = report["parts"]
    assert parts["demo"]["status"] == "ok"
    assert parts["demo"]["result"] == {"ok": True, "steps_trained": 7}
    assert parts["demo"]["peak_gib"] is None  # a subprocess: not this process's memory
    assert parts["layer3"] == {
        "status": "failed",
        "error": "RuntimeError: CUDA out of memory",
        "seconds": parts["layer3"]["seconds"],
        "peak_gib": 1.5,
    }
    assert parts["trl_e2e"]["status"] == "not runnable"
    assert parts["trl_e2e"]["error"] == "trl is not installed"


def test_the_command_line_prints_the_command_writes_the_json_and_fails_on_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stand_in_parts(monkeypatch)
    monkeypatch.setattr(gpu_check, "pick_device", lambda: "cuda")
    out = tmp_path / "check.json"
    argv = ["--out", str(out), "--parts", "demo", "trl_e2e"]
    assert main(argv) == 0  # not runnable is not a failure
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"python -m parity.curves.gpu_check --out {out} --parts demo trl_e2e"
    report = json.loads(out.read_text())
    assert report["command"] == printed[0]
    assert list(report["parts"]) == ["demo", "trl_e2e"]
    assert main(["--out", str(out), "--parts", "layer3"]) == 1
