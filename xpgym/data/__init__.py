"""Small data files shipped with xpgym (read them with `importlib.resources`).

* ``search_corpus.jsonl``: the default corpus of `xpgym.core.tools.search.SearchTool`, 145
  short encyclopedia-style paragraphs (geography, science, music, history, literature), one
  JSON object per line: ``{"id": str, "title": str, "text": str}``. Written for xpgym's QA
  envs, in original wording; it holds chains of facts for multi-hop questions (a person's
  birthplace, the river of that city, the sea that river flows into, ...).
"""
