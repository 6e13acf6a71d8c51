"""Specification of `SearchTool`, its backends (local tantivy index, HTTP client) and corpus."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hang_guard import HANG_GUARD_S
from hypothesis import given, settings
from hypothesis import strategies as st
from toy_envs import ToyEnv

pytest.importorskip("tantivy")

from xpgym.core.tools.base import ToolCall
from xpgym.core.tools.search.backend import SearchBackend, SearchError, SearchHit
from xpgym.core.tools.search.client import HTTPSearchBackend
from xpgym.core.tools.search.corpus import default_corpus_path, load_corpus
from xpgym.core.tools.search.index import LocalSearchIndex, default_search_index
from xpgym.core.tools.search.server import make_search_server
from xpgym.core.tools.search.tool import SearchTool, format_hits, make_search_tool
from xpgym.core.wrappers.tools import ToolEnvWrapper

DOCS = [
    {"id": "v", "title": "Vienna", "text": "Vienna is the capital of Austria, on the Danube."},
    {"id": "d", "title": "Danube", "text": "The Danube flows into the Black Sea."},
    {"id": "s", "title": "Seine", "text": "The Seine flows through Paris to the English Channel."},
]


@pytest.fixture(scope="module")
def index() -> LocalSearchIndex:
    return default_search_index()


def call(query: str) -> ToolCall:
    return ToolCall("search", {"query": query})


def titles(hits: list[SearchHit] | tuple[SearchHit, ...]) -> list[str]:
    return [hit.title for hit in hits]


# ------------------------------------------------------------------------------ corpus


def test_shipped_corpus_is_valid_jsonl_of_60_to_150_documents_with_unique_ids() -> None:
    docs = load_corpus(default_corpus_path())
    assert 60 <= len(docs) <= 150
    ids = [doc["id"] for doc in docs]
    assert len(set(ids)) == len(ids)
    assert all(doc["title"] and len(doc["text"]) > 50 for doc in docs)


@pytest.mark.parametrize(
    ("query", "title", "fact"),
    [
        ("Where was Albert Einstein born?", "Albert Einstein", "Ulm"),
        ("Ulm river", "Ulm", "Danube"),
        ("Danube mouth sea", "Danube", "Black Sea"),
        ("polonium named after country", "Polonium", "Poland"),
        ("capital of Poland", "Poland", "Warsaw"),
        ("Warsaw river", "Warsaw", "Vistula"),
        ("Victor Hugo birthplace", "Victor Hugo", "Besançon"),
        ("Besancon river", "Besançon", "Doubs"),
    ],
)
def test_shipped_corpus_answers_each_hop_of_a_multi_hop_chain(
    index: LocalSearchIndex, query: str, title: str, fact: str
) -> None:
    hits = index.search(query, 3)
    assert title in titles(hits)
    assert fact in next(hit.text for hit in hits if hit.title == title)


def test_load_corpus_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"title": "a", "text": "ok"}\n\n{"title": "b"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"c\.jsonl:3: \"text\" must be a non-empty string"):
        load_corpus(path)
    path.write_text("not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r":1: invalid JSON"):
        load_corpus(path)


def test_load_corpus_defaults_title_and_id(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "only text"}\n{"text": "t", "id": 7}\n', encoding="utf-8")
    assert load_corpus(path) == [
        {"title": "", "text": "only text", "id": ""},
        {"title": "", "text": "t", "id": "7"},
    ]


# ------------------------------------------------------------------------- local index


def test_local_index_ranks_the_matching_document_first() -> None:
    index = LocalSearchIndex(DOCS)
    hits = index.search("capital of Austria", 2)
    assert hits[0] == SearchHit("Vienna", DOCS[0]["text"], hits[0].score, "v")
    assert hits[0].score > 0
    assert len(index.search("flows", 10)) == 2


def test_local_index_matches_stems_case_and_accents() -> None:
    index = LocalSearchIndex([{"title": "São Paulo", "text": "The largest city of Brazil."}])
    assert titles(index.search("SAO PAULO cities", 1)) == ["São Paulo"]


def test_local_index_returns_nothing_for_unknown_words_or_top_k_zero() -> None:
    index = LocalSearchIndex(DOCS)
    assert index.search("zzzz qqqq", 3) == []
    assert index.search("!!! ???", 3) == []
    assert index.search("Vienna", 0) == []


@pytest.mark.parametrize(
    "query", ['"unclosed', "a AND", "NOT", "title:", "((( x", "foo:bar", "x^", "[1 TO", "AND OR"]
)
@pytest.mark.parametrize("query_syntax", [False, True])
def test_query_syntax_errors_never_raise(query: str, query_syntax: bool) -> None:
    index = LocalSearchIndex(DOCS, query_syntax=query_syntax)
    assert isinstance(index.search(query, 3), list)


def test_query_syntax_option_supports_phrases_and_fields_and_falls_back_to_words() -> None:
    index = LocalSearchIndex(DOCS, query_syntax=True)
    assert titles(index.search("title:Seine", 3)) == ["Seine"]
    assert titles(index.search('"Black Sea"', 3)) == ["Danube"]
    assert titles(index.search("Austria's (capital", 1)) == ["Vienna"]  # unparsable: words


_PLAIN = LocalSearchIndex(DOCS)
_SYNTAX = LocalSearchIndex(DOCS, query_syntax=True)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_a_valid_query(query: str) -> None:
    for backend in (_PLAIN, _SYNTAX):
        hits = backend.search(query, 3)
        assert len(hits) <= 3


def test_index_built_in_a_directory_can_be_reopened(tmp_path: Path) -> None:
    LocalSearchIndex(DOCS, index_dir=tmp_path / "idx")
    LocalSearchIndex(DOCS[:1], index_dir=tmp_path / "idx")  # rebuilt, not appended to
    reopened = LocalSearchIndex.open(tmp_path / "idx")
    assert reopened.num_docs == 1
    assert titles(reopened.search("Austria", 3)) == ["Vienna"]
    with pytest.raises(ValueError, match="no tantivy index"):
        LocalSearchIndex.open(tmp_path / "empty")


def test_local_index_rejects_invalid_documents() -> None:
    with pytest.raises(ValueError, match="at least one document"):
        LocalSearchIndex([])
    with pytest.raises(ValueError, match=r"document 1: \"text\""):
        LocalSearchIndex([DOCS[0], {"title": "no text"}])


def test_local_index_searches_concurrently_from_threads() -> None:
    index = LocalSearchIndex(DOCS)
    queries = ["Austria", "Black Sea", "Paris", "Danube"] * 25
    expected = [titles(index.search(q, 2)) for q in queries]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda q: titles(index.search(q, 2)), queries))
    assert got == expected


# -------------------------------------------------------------------------------- tool


def test_tool_parses_tag_and_json_calls() -> None:
    tool = SearchTool(LocalSearchIndex(DOCS))
    assert tool.parse("I will look. <search> capital of Austria </search>") == ToolCall(
        "search", {"query": "capital of Austria"}, "<search> capital of Austria </search>"
    )
    action = '<tool_call>{"name": "search", "arguments": {"query": "Seine"}}</tool_call>'
    assert tool.parse(action) == ToolCall("search", {"query": "Seine"}, action)
    assert tool.parse("no call here") is None
    assert tool.parse("<search></search>").error is not None
    bad = '<tool_call>{"name": "search", "arguments": {"query": 3}}</tool_call>'
    assert "expected string" in tool.parse(bad).error
    extra = '<tool_call>{"name": "search", "arguments": {"query": "a", "k": 1}}</tool_call>'
    assert "unexpected argument 'k'" in tool.parse(extra).error


def test_tool_schema_and_instructions_name_the_formats() -> None:
    tool = SearchTool(LocalSearchIndex(DOCS), top_k=2)
    schema = tool.function_schema()
    assert schema["function"]["name"] == "search"
    assert schema["function"]["parameters"]["required"] == ["query"]
    assert "<search>" in tool.instructions()
    assert "2 documents" in tool.instructions()


def test_observation_lists_top_k_documents_in_gem_format() -> None:
    tool = SearchTool(LocalSearchIndex(DOCS), top_k=2)
    result = tool.execute(call("Danube"))
    assert result.ok
    lines = result.observation.split("\n")
    assert len(lines) == 2
    assert lines[0].startswith("Doc 1 (Title: Danube) The Danube flows into the Black Sea.")
    assert lines[1].startswith("Doc 2 (Title: Vienna) ")
    assert result.info["exit_reason"] == "ok"
    assert result.info["num_results"] == 2
    assert result.info["cached"] is False


def test_observation_is_truncated_to_the_cap() -> None:
    hits = [SearchHit("T", "x" * 500)] * 3
    text = format_hits(hits, 100)
    assert len(text) == 100
    assert text.endswith(" ... [truncated]")
    tool = SearchTool(default_search_index(), top_k=5, max_output_chars=120)
    result = tool.execute(call("river capital"))
    assert len(result.observation) <= 120
    assert result.observation.endswith("[truncated]")


def test_no_results_is_a_successful_call_that_says_so() -> None:
    result = SearchTool(LocalSearchIndex(DOCS)).execute(call("zzzz"))
    assert result.ok
    assert result.info["num_results"] == 0
    assert "No documents found" in result.observation


def test_empty_query_is_a_failed_call_and_malformed_call_is_a_programming_error() -> None:
    tool = SearchTool(LocalSearchIndex(DOCS))
    result = tool.execute(call("   "))
    assert not result.ok
    assert result.info["exit_reason"] == "empty_query"
    with pytest.raises(ValueError, match="malformed"):
        tool.execute(ToolCall("search", {}, error="bad"))


def test_results_are_cached_by_normalised_query() -> None:
    tool = SearchTool(LocalSearchIndex(DOCS))
    first = tool.execute(call("capital  of Austria"))
    second = tool.execute(call(" capital of\nAustria "))
    assert second.info["cached"] is True
    assert second.observation == first.observation
    assert tool.cache_stats == {"hits": 1, "misses": 1, "size": 1, "capacity": 1024}
    tool.clear_cache()
    assert tool.cache_stats["size"] == 0


def test_cache_evicts_least_recently_used_and_can_be_disabled() -> None:
    tool = SearchTool(LocalSearchIndex(DOCS), cache_size=2)
    for query in ("a Vienna", "b Seine", "a Vienna", "c Danube"):  # "b Seine" is evicted
        tool.execute(call(query))
    assert tool.execute(call("a Vienna")).info["cached"] is True
    assert tool.execute(call("b Seine")).info["cached"] is False
    off = SearchTool(LocalSearchIndex(DOCS), cache_size=0)
    off.execute(call("Vienna"))
    assert off.execute(call("Vienna")).info["cached"] is False


class FlakyBackend(SearchBackend):
    def __init__(self) -> None:
        self.calls = 0
        self.closed = 0

    def search(self, query: str, top_k: int) -> list[SearchHit]:
        self.calls += 1
        if self.calls == 1:
            raise SearchError("boom", reason="connection")
        if query == "crash":
            raise RuntimeError("bug in backend")
        return [SearchHit("T", "text")]

    def close(self) -> None:
        self.closed += 1


def test_backend_errors_become_failed_results_and_are_not_cached() -> None:
    backend = FlakyBackend()
    tool = SearchTool(backend)
    failed = tool.execute(call("q"))
    assert not failed.ok
    assert failed.info["exit_reason"] == "connection"
    assert failed.observation == "Search failed: boom"
    assert tool.execute(call("q")).ok
    crashed = tool.execute(call("crash"))
    assert not crashed.ok
    assert crashed.info["exit_reason"] == "error"
    assert "RuntimeError: bug in backend" in crashed.observation


def test_close_closes_only_an_owned_backend() -> None:
    shared, owned = FlakyBackend(), FlakyBackend()
    SearchTool(shared).close()
    tool = SearchTool(owned, close_backend=True)
    tool.close()
    tool.close()
    assert (shared.closed, owned.closed) == (0, 1)


def test_tool_is_thread_safe() -> None:
    tool = SearchTool(default_search_index(), cache_size=8)
    queries = [f"capital {w}" for w in ("Austria", "Poland", "France", "Egypt", "Canada")] * 20
    expected = {q: tool.execute(call(q)).observation for q in set(queries)}
    tool.clear_cache()
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda q: (q, tool.execute(call(q)).observation), queries))
    assert all(obs == expected[q] for q, obs in got)
    stats = tool.cache_stats
    assert stats["hits"] + stats["misses"] == len(queries)
    assert stats["size"] <= 8


def test_default_tool_uses_the_shared_shipped_index() -> None:
    tool = SearchTool()
    assert tool.backend is default_search_index()
    assert "Vienna" in tool.execute(call("capital of Austria")).observation


def test_make_search_tool_builds_from_plain_data(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    tool = make_search_tool(corpus=corpus, top_k=1)
    assert tool.execute(call("Paris")).observation.startswith("Doc 1 (Title: Seine)")
    assert tool.close_backend
    assert make_search_tool().backend is default_search_index()
    assert isinstance(make_search_tool(url="http://127.0.0.1:9/x").backend, HTTPSearchBackend)
    with pytest.raises(ValueError, match="not both"):
        make_search_tool(corpus=corpus, url="http://127.0.0.1:9/x")


def test_tool_works_inside_the_tool_wrapper() -> None:
    env = ToolEnvWrapper(ToyEnv(), [SearchTool(LocalSearchIndex(DOCS), top_k=1)])
    obs, info = env.reset(seed=0)
    assert "<search>" in obs
    assert info["tools"][0]["function"]["name"] == "search"
    obs, _reward, terminated, truncated, info = env.step("<search>Black Sea</search>")
    assert obs.startswith("Doc 1 (Title: Danube)")
    assert (terminated, truncated) == (False, False)
    assert info["tool_calls"][0]["ok"] is True


# -------------------------------------------------------------------------------- HTTP


@pytest.fixture
def served() -> Iterator[str]:
    server = make_search_server(LocalSearchIndex(DOCS))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/search"
    server.shutdown()
    server.server_close()
    thread.join(5)


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers every POST with what the server's `script` says, (status, body), once the
    server's `answering` event is set (a test clears it to hold requests unanswered)."""

    def do_POST(self) -> None:
        status, body = self.server.script  # type: ignore[attr-defined]
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.answering.wait(HANG_GUARD_S)  # type: ignore[attr-defined]
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    server.daemon_threads = True
    server.script = (200, '{"results": []}')  # type: ignore[attr-defined]
    server.answering = threading.Event()  # type: ignore[attr-defined]
    server.answering.set()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def _url(server: http.server.HTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/search"


def test_http_backend_returns_what_the_served_index_returns(served: str) -> None:
    local = SearchTool(LocalSearchIndex(DOCS), top_k=2)
    remote = SearchTool(HTTPSearchBackend(served), top_k=2)
    for query in ("capital of Austria", "flows", "zzzz", '"quoted (odd'):
        assert remote.execute(call(query)).observation == local.execute(call(query)).observation
    hits = HTTPSearchBackend(served).search("Austria", 1)
    assert hits == [SearchHit("Vienna", DOCS[0]["text"], hits[0].score, "v")]


def test_http_protocol_is_json_query_and_top_k(served: str) -> None:
    import urllib.request

    request = urllib.request.Request(
        served, data=json.dumps({"query": "Seine", "top_k": 1}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        payload = json.loads(response.read())
    assert payload["results"][0]["title"] == "Seine"
    assert set(payload["results"][0]) == {"title", "text", "score", "id"}


def test_http_timeout_is_a_failed_call(scripted: Any) -> None:
    scripted.answering.clear()  # the server answers only after the call has returned
    tool = SearchTool(HTTPSearchBackend(_url(scripted), timeout_s=0.2))
    result = tool.execute(call("slow"))
    scripted.answering.set()
    assert not result.ok
    assert result.info["exit_reason"] == "timeout"
    assert "did not answer within 0.2 s" in result.observation


def test_http_500_is_a_failed_call_with_the_status(scripted: Any) -> None:
    scripted.script = (500, '{"error": "index offline"}')
    result = SearchTool(HTTPSearchBackend(_url(scripted))).execute(call("q"))
    assert not result.ok
    assert result.info["exit_reason"] == "http_error"
    assert result.info["infra_error"]["kind"] == "tool_backend_error"
    assert "HTTP 500" in result.observation
    assert "index offline" in result.observation


@pytest.mark.parametrize(
    "body", ["not json", '{"hits": []}', '{"results": [{"title": "t"}]}', '{"results": [1]}']
)
def test_malformed_http_response_is_a_failed_call(scripted: Any, body: str) -> None:
    scripted.script = (200, body)
    result = SearchTool(HTTPSearchBackend(_url(scripted))).execute(call("q"))
    assert not result.ok
    assert result.info["exit_reason"] == "bad_response"


def test_unreachable_server_is_a_failed_call() -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Scripted)
    url = _url(server)
    server.server_close()  # nothing listens on that port now
    result = SearchTool(HTTPSearchBackend(url, timeout_s=2)).execute(call("q"))
    assert not result.ok
    assert result.info["exit_reason"] == "connection"


def test_search_server_rejects_bad_requests(served: str) -> None:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(served, data=b'{"top_k": 1}', method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 400
    caught.value.close()


def test_http_backend_validates_its_arguments() -> None:
    with pytest.raises(ValueError, match="http"):
        HTTPSearchBackend("127.0.0.1:8000")
    with pytest.raises(ValueError, match="timeout_s"):
        HTTPSearchBackend("http://x", timeout_s=0)


def test_a_deep_copied_search_tool_shares_the_read_only_index() -> None:
    import copy

    index = LocalSearchIndex([{"title": "Vienna", "text": "Vienna is on the Danube."}])
    assert copy.deepcopy(index) is index
    copied = copy.deepcopy({"backend": index, "calls": [1]})
    assert copied["backend"] is index
    assert copied["backend"].search("Danube", 1)[0].title == "Vienna"
