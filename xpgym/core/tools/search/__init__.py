r"""Search: the model searches a document collection and reads the top-k passages.

One module per job; import a name from its module (this package imports none of them):

* `tool`: `SearchTool` (the calls ``<search>query</search>`` and a JSON ``search`` function
  call, the observation format, the result cache) and `make_search_tool` (a tool from plain
  data, the factory of the QA envs' ``-search`` variants).
* `backend`: the contract a backend implements (`SearchBackend`, ``search(query, top_k) ->
  list[SearchHit]``) and the `SearchError` it raises when it cannot answer.
* `corpus`: JSONL document collections (`load_corpus`) and the shipped one
  (`default_corpus_path`).
* `index`: `LocalSearchIndex`, a BM25 index built with tantivy, and `default_search_index`
  (the shipped corpus's index, shared by the process).
* `protocol`: the JSON-over-HTTP protocol of a remote retrieval server.
* `client`: `HTTPSearchBackend`, the client of such a server.
* `server`: `make_search_server`, which serves any backend with that protocol.
* `cache`: the thread-safe LRU cache of results `SearchTool` keeps.

``python -m xpgym.core.tools.search --corpus docs.jsonl --port 8000`` serves a local index
over HTTP (`xpgym.core.tools.search.__main__`).
"""
