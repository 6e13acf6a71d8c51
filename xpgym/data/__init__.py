"""Small data files shipped with xpgym (read them with `importlib.resources`).

* ``search_corpus.jsonl``: the default corpus of `xpgym.core.tools.search.tool.SearchTool`,
  145 short encyclopedia-style paragraphs (geography, science, music, history, literature),
  one JSON object per line: ``{"id": str, "title": str, "text": str}``. Written for xpgym's
  QA envs, in original wording; it holds chains of facts for multi-hop questions (a person's
  birthplace, the river of that city, the sea that river flows into, ...).
* ``code_problems.jsonl``: the problems of ``code:Sample-v0``, 16 programming tasks written
  for xpgym, one JSON object per line: ``{"id", "title", "statement", "tests", "solution"}``
  plus ``"fn_name"`` for function-call problems (format: `xpgym.envs.code.problems`). Every
  reference solution passes its tests in the sandbox (``tests/envs/test_code_env.py``).
* ``math_sample.jsonl``: the problems of ``math:Sample-v0``, 20 math questions written for
  xpgym (arithmetic to sets and intervals), one JSON object per line: ``{"problem": str,
  "answer": str}`` (the answer in LaTeX or plain text, graded by math-verify). Each answer
  was checked independently, and ``tests/envs/test_math_envs.py`` grades another form of it.
* ``qa_sample.jsonl``: the questions of ``qa:Sample-v0``, 27 questions written for xpgym
  (most of them multi-hop), one JSON object per line: ``{"question": str, "answer":
  [str, ...], "docs": [corpus id, ...]}``; every answer is in the listed documents of
  ``search_corpus.jsonl`` (checked by ``tests/envs/test_qa_envs.py``).
* ``retail_db.json`` and ``retail_tasks.json``: the store of ``multiagent:CustomerService-v0``
  (users, products with variants, orders in several statuses) and its tasks (instruction,
  scripted user messages, reference actions, required outputs), written for xpgym (format:
  `xpgym.envs.multiagent.retail`).
"""
