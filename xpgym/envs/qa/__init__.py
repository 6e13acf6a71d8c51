"""Question answering. Ids: ``qa:<Name>-v0[-eval]``; search-tool variants ``...-search``.

Every id is a `xpgym.envs.qa.env.QAEnv` (single-turn, EM reward, answer in
``<answer>...</answer>``) over one dataset:

* ``qa:Sample-v0``: the shipped ``xpgym/data/qa_sample.jsonl``, offline; its answers are in
  the shipped search corpus, so ``qa:Sample-v0-search`` is solvable end to end.
* GEM's training sets, from the Hugging Face hub (column ``problem`` for the question):
  ``qa:HotpotQA-v0`` (``axon-rl/HotpotQA``) and ``qa:NaturalQuestions-v0``
  (``axon-rl/NaturalQuestions``), split ``train``.
* GEM's evaluation sets: the DeepResearcher test splits of ``axon-rl/search-eval`` (512
  questions each; columns ``question`` and ``answer``): ``qa:TriviaQA-v0`` (``tq``),
  ``qa:PopQA-v0`` (``popqa``), ``qa:TwoWikiMultihopQA-v0`` (``2wiki``), ``qa:Musique-v0``
  (``musique``), ``qa:Bamboogle-v0`` (``bamboogle``), ``qa:HotpotQA-v0-eval``
  (``hotpotqa``) and ``qa:NaturalQuestions-v0-eval`` (``nq``); and ``qa:NQOpen-v0``
  (``google-research-datasets/nq_open``, split ``validation``), GEM's ``eval:QaOpen``.

The hub ids, splits and columns are those GEM registers (``gem/envs/__init__.py``); they are
marked ``requires_download`` and were not fetched here (no network in tests).

The ``-search`` variants add `xpgym.core.tools.search.tool.SearchTool` (at most
`MAX_SEARCH_CALLS` calls) over the shipped corpus; for the hub datasets pass a retrieval
server, e.g. ``xpgym.make("qa:HotpotQA-v0-search", tools_kwargs={"url": URL})``.

``qa:Sample-v0-search-f1`` is ``qa:Sample-v0-search`` scored by reward functions
(`xpgym.envs.qa.rewards`): the answer's F1, plus 0.1 for the first well-formed search call.
"""

from __future__ import annotations

from xpgym.core.registry import register
from xpgym.core.wrappers.tool_variants import register_tool_variant

__all__ = ["MAX_SEARCH_CALLS", "register_envs"]

MAX_SEARCH_CALLS = 5
"""Tool-call budget of the ``-search`` variants (multi-hop questions need two or three)."""

_ENTRY_POINT = "xpgym.envs.qa.env:QAEnv"
_SEARCH_EVAL = "axon-rl/search-eval"
_EVAL_SETS = [  # (id, split of axon-rl/search-eval, description)
    ("qa:TriviaQA-v0", "tq", "TriviaQA"),
    ("qa:PopQA-v0", "popqa", "PopQA"),
    ("qa:TwoWikiMultihopQA-v0", "2wiki", "2WikiMultihopQA"),
    ("qa:Musique-v0", "musique", "MuSiQue"),
    ("qa:Bamboogle-v0", "bamboogle", "Bamboogle"),
    ("qa:HotpotQA-v0-eval", "hotpotqa", "HotpotQA"),
    ("qa:NaturalQuestions-v0-eval", "nq", "NaturalQuestions"),
]


def register_envs() -> None:
    """Register the QA ids and their ``-search`` variants (entry points imported by `make`)."""
    ids = ["qa:Sample-v0"]
    register(
        "qa:Sample-v0",
        _ENTRY_POINT,
        description="Answer one of 27 shipped (often multi-hop) questions; EM reward.",
    )
    for env_id, dataset, name in (
        ("qa:HotpotQA-v0", "axon-rl/HotpotQA", "HotpotQA"),
        ("qa:NaturalQuestions-v0", "axon-rl/NaturalQuestions", "NaturalQuestions"),
    ):
        ids.append(env_id)
        register(
            env_id,
            _ENTRY_POINT,
            requires_download=True,
            description=f"{name} training questions ({dataset}); EM reward.",
            dataset=dataset,
            split="train",
            question_key="problem",
        )
    for env_id, split, name in _EVAL_SETS:
        ids.append(env_id)
        register(
            env_id,
            _ENTRY_POINT,
            requires_download=True,
            description=f"{name} test questions ({_SEARCH_EVAL}, split {split}); EM reward.",
            dataset=_SEARCH_EVAL,
            split=split,
        )
    ids.append("qa:NQOpen-v0")
    register(
        "qa:NQOpen-v0",
        _ENTRY_POINT,
        requires_download=True,
        description="NQ-Open validation questions (google-research-datasets/nq_open); EM reward.",
        dataset="google-research-datasets/nq_open",
        split="validation",
    )
    for env_id in ids:
        register_tool_variant(
            env_id,
            "xpgym.core.tools.search.tool:make_search_tool",
            "search",
            max_tool_calls=MAX_SEARCH_CALLS,
        )
    register(
        "qa:Sample-v0-search-f1",
        "xpgym.envs.qa.rewards:make_f1_env",
        base_id="qa:Sample-v0-search",
        description="qa:Sample-v0-search scored by reward functions: answer F1, +0.1 for the "
        "first well-formed search call.",
    )
