r"""Math envs: answer in ``\boxed{}``, graded by math-verify (`xpgym.envs.math.grading`).

Ids:

* ``math:Sample-v0``: the 20 problems shipped in ``xpgym/data/math_sample.jsonl`` (offline).
* ``math:Arithmetic-v0[-easy|-hard|-random]``: generated expressions and linear equations
  (offline, no data).
* GEM's training sets, on the Hugging Face hub (``requires_download=True``):
  ``math:GSM8K-v0``, ``math:Math12K-v0``, ``math:Orz57K-v0``, ``math:DeepScaleR40K-v0``,
  ``math:ASDiv2K-v0`` (datasets ``axon-rl/...``, columns ``problem`` and ``answer``).
* Eval sets (``requires_download=True``): ``eval:MATH500-v0``, ``eval:AIME24-v0``,
  ``eval:AMC-v0``, ``eval:OlympiadBench-v0``, ``eval:Minerva-v0`` (splits of
  ``axon-rl/math-eval``, as in GEM) and ``eval:GSM8K-v0`` (``openai/gsm8k``, config
  ``main``, split ``test``; gold answers after ``####``; GEM registers no GSM8K eval id).
* ``<id>-python`` for every id above but the arithmetic presets: the same task with a
  sandboxed Python tool (at most 3 calls per episode, `xpgym.core.tools.python.PythonTool`).

Eval ids sample rows at random like the others; sweep them in order with
``reset(options={"index": i})``.
"""

from __future__ import annotations

from xpgym.core.registry import register
from xpgym.core.wrappers.tool_variants import register_tool_variant
from xpgym.envs.common.presets import register_presets

__all__ = ["register_envs"]

_DATASET = "xpgym.envs.math.dataset:MathDatasetEnv"
_ARITHMETIC = "xpgym.envs.math.arithmetic:ArithmeticEnv"

# id -> (hub dataset, split or None, description); columns "problem" and "answer".
_HUB_SETS = {
    "math:GSM8K-v0": ("axon-rl/GSM-8k", None, "GSM8K grade-school word problems (GEM's copy)."),
    "math:Math12K-v0": ("axon-rl/MATH-12k", None, "MATH competition problems, 12k (GEM)."),
    "math:Orz57K-v0": ("axon-rl/ORZ-57k", None, "Open-Reasoner-Zero's 57k math problems (GEM)."),
    "math:DeepScaleR40K-v0": ("axon-rl/DeepScaleR-40K", None, "DeepScaleR's 40k problems (GEM)."),
    "math:ASDiv2K-v0": ("axon-rl/ASDIV-2k", None, "ASDiv arithmetic word problems, 2k (GEM)."),
    "eval:MATH500-v0": ("axon-rl/math-eval", "math", "MATH500 test problems."),
    "eval:AIME24-v0": ("axon-rl/math-eval", "aime24", "AIME 2024 problems."),
    "eval:AMC-v0": ("axon-rl/math-eval", "amc", "AMC problems (83)."),
    "eval:OlympiadBench-v0": ("axon-rl/math-eval", "olympiad_bench", "OlympiadBench problems."),
    "eval:Minerva-v0": ("axon-rl/math-eval", "minerva", "Minerva math problems (272)."),
}


def register_envs() -> None:
    """Register the math and math-eval ids; entry points are imported only by `xpgym.make`."""
    ids = ["math:Sample-v0"]
    register(
        "math:Sample-v0",
        _DATASET,
        description="20 shipped math problems (arithmetic to intervals); answer in \\boxed{}.",
    )
    register_presets(
        "math",
        "Arithmetic",
        _ARITHMETIC,
        "Generated: 3-4 integers in 1..20 with + - * /, or ax + b = cx + d.",
        "Generated: 2-3 integers in 1..10 with + - * /, or ax + b = c.",
        "Generated: 4-6 integers in 1..50 with + - * /, or ax + b = cx + d.",
    )
    ids.append("math:Arithmetic-v0")  # the presets get no tool variant of their own
    for env_id, (path, split, description) in _HUB_SETS.items():
        register(
            env_id,
            _DATASET,
            path=path,
            split=split,
            requires_download=True,
            description=description,
        )
    register(
        "eval:GSM8K-v0",
        _DATASET,
        path="openai/gsm8k",
        name="main",
        split="test",
        question_key="question",
        answer_key="answer",
        answer_regex=r"####\s*(.+?)\s*$",
        requires_download=True,
        description="GSM8K test set (1319 problems), gold answer after '####'.",
    )
    ids += [*_HUB_SETS, "eval:GSM8K-v0"]
    for env_id in ids:
        register_tool_variant(
            env_id,
            "xpgym.core.tools.python:PythonTool",
            "python",
            max_tool_calls=3,
        )
