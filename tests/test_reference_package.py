"""The reference package's boundaries: old import paths still work and warn, importing the
package or the model builder does not import torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("old", "name", "new"),
    [
        ("xpgym.adapters.torch", "Trainer", "xpgym.reference.trainer"),
        ("xpgym.adapters.torch", "TrainerConfig", "xpgym.reference.trainer"),
        ("xpgym.adapters.torch", "train", "xpgym.reference.trainer"),
        ("xpgym.adapters.torch", "aggregate_loss", "xpgym.reference.losses"),
        ("xpgym.adapters.torch", "token_logprobs", "xpgym.reference.losses"),
        ("xpgym.adapters.tiny_lm", "build_tiny_tokenizer", "xpgym.reference.tiny_model"),
        ("xpgym.adapters.tiny_lm", "env_corpus", "xpgym.reference.tiny_model"),
    ],
)
def test_old_paths_give_the_moved_objects_with_a_deprecation_warning(
    old: str, name: str, new: str
) -> None:
    if old.endswith("torch"):
        pytest.importorskip("torch", reason="the reference trainer imports torch")
    old_module = __import__(old, fromlist=[name])
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved to {new}\.{name}"):
        moved = getattr(old_module, name)
    assert moved is getattr(__import__(new, fromlist=[name]), name)


@pytest.mark.parametrize("old", ["xpgym.adapters.torch", "xpgym.adapters.tiny_lm"])
def test_old_paths_refuse_names_that_never_existed(old: str) -> None:
    if old.endswith("torch"):
        pytest.importorskip("torch", reason="the reference trainer imports torch")
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = __import__(old, fromlist=["x"]).not_a_name


def test_the_package_and_the_model_builder_import_without_torch() -> None:
    code = (
        "import sys, xpgym.reference, xpgym.reference.tiny_model, xpgym.adapters.tiny_lm\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
