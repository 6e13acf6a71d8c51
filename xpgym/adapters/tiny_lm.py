"""Deprecated path of the tiny model builder: it moved to `xpgym.reference.tiny_model`.

Every name this module used to export still resolves here, from its new home, with a
`DeprecationWarning` naming that home. This path will be removed.
"""

from xpgym.core.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        [
            "BOXED_OPEN",
            "CHATML_TEMPLATE",
            "PIECE_PATTERN",
            "SPECIAL_TOKENS",
            "build_tiny_model",
            "build_tiny_tokenizer",
            "env_corpus",
            "numeric_embedding",
        ],
        "xpgym.reference.tiny_model",
    ),
)
