"""SQuAD-style answer grading: normalisation, exact match and token F1 against gold answers.

`normalize_answer` follows the SQuAD v1.1 evaluation script's rules, in this order:
lowercase; delete ASCII punctuation (`string.punctuation`); replace the whole words ``a``,
``an`` and ``the`` by a space; collapse runs of whitespace into single spaces and strip.
Punctuation is deleted, not replaced: ``"The  Eiffel-Tower!"`` becomes ``"eiffeltower"``
and ``"Río de la Plata"`` becomes ``"río de la plata"`` (only ASCII punctuation and case
rules apply; accents are kept).

`exact_match` is 1.0 when the normalised prediction equals a normalised gold answer.
`token_f1` splits normalised strings on spaces and scores the bag-of-tokens overlap:
``precision = common / len(prediction tokens)``, ``recall = common / len(gold tokens)``,
``F1 = 2PR / (P + R)`` (0.0 when nothing is shared or either side is empty). Both take the
maximum over the gold answers.

`gold_answers` turns a dataset's answer field (a string, a number or a list of them) into
the list of strings the scores compare against.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = ["exact_match", "gold_answers", "normalize_answer", "token_f1"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation and the articles a/an/the, collapse whitespace."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: Iterable[str]) -> float:
    """1.0 if the normalised `prediction` equals some normalised gold answer, else 0.0."""
    predicted = normalize_answer(prediction)
    return float(any(predicted == normalize_answer(gold) for gold in golds))


def token_f1(prediction: str, golds: Iterable[str]) -> float:
    """The best token-level F1 of `prediction` against any gold answer (0.0 for no golds)."""
    predicted = normalize_answer(prediction).split()
    return max((_f1(predicted, normalize_answer(gold).split()) for gold in golds), default=0.0)


def _f1(predicted: list[str], gold: list[str]) -> float:
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision = common / len(predicted)
    recall = common / len(gold)
    return 2 * precision * recall / (precision + recall)


def gold_answers(answer: Any) -> list[str]:
    """The gold answers in a dataset's answer field, as strings.

    A string or a number gives one answer; a list or tuple gives one per element (numbers
    converted with `str`). Blank answers are dropped.

    Raises:
        TypeError: the field (or an element) is of another type, e.g. a dict.
    """
    items = answer if isinstance(answer, (list, tuple)) else [answer]
    golds = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise TypeError(
                f"an answer must be a string, a number or a list of them, got {item!r:.80}"
            )
        text = str(item).strip()
        if text:
            golds.append(text)
    return golds
