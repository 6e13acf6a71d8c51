"""The trajectory viewer without a browser: reading inputs, the token view, the HTML, the CLI.

The page itself is driven in a real browser in tests/viewer/test_viewer_browser.py.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from pathlib import Path

import pytest

from xpgym.__main__ import main
from xpgym.core.trajectory import Episode, Turn, load_episodes, save_episodes
from xpgym.eval.records import to_line
from xpgym.viewer import load_view_episodes, render_html, write_viewer
from xpgym.viewer.inputs import episode_view
from xpgym.viewer.page import default_output, embed_json
from xpgym.viewer.tokens import ENV, POLICY, PROMPT, token_view

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "parity" / "tokens" / "golden" / "tool_turns.jsonl"
PLANTED = '</script><script>window.__pwned = 1</script><img src=x onerror="alert(1)">&amp;'
PNG_URL = "data:image/png;base64,iVBORw0KGgo="


def _views(episodes):
    return [episode_view(e.to_dict()) for e in episodes]


def _data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="xpgym-data">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))


def _record(
    env_id, seed, *, status="ok", success=False, episode=None, transcript=None, results=None
):
    if results is None and status == "ok":
        results = [
            {
                "agent": None,
                "model": "random",
                "return": 1.0 if success else 0.0,
                "turns": 1,
                "success": success,
                "invalid_actions": 0,
                "tokens": None,
            }
        ]
    return {
        "env_id": env_id, "seed": seed, "sample": 0, "status": status,
        "error": None if status == "ok" else "RuntimeError: boom",
        "results": results or [], "episode": episode, "transcript": transcript,
    }  # fmt: skip


def test_golden_file_gives_one_view_per_episode_with_return_turns_and_status():
    episodes = load_episodes(GOLDEN)
    views = load_view_episodes(GOLDEN)
    assert [v["env"] for v in views] == [e.env_id for e in episodes]
    assert [v["return"] for v in views] == [e.total_reward for e in episodes]
    assert [v["turns"] for v in views] == [len(e.turns) for e in episodes]
    assert [v["status"] for v in views] == [
        "success" if e.total_reward >= 1.0 else "failure" for e in episodes
    ]
    assert [v["steps"][-1]["action"] for v in views] == [e.turns[-1].action for e in episodes]


def test_token_view_colours_tokens_by_the_trainers_response_mask():
    episode = load_episodes(GOLDEN)[0]
    (row,) = token_view(episode)["rows"]
    turns = episode.turns
    policy = [(turn, ids) for kind, turn, ids in row["segments"] if kind == POLICY]
    assert policy == [(t, turn.response_ids) for t, turn in enumerate(turns)]
    prompt = [ids for kind, _, ids in row["segments"] if kind == PROMPT]
    assert prompt == [turns[0].prompt_ids]
    flat = [token for _, _, ids in row["segments"] for token in ids]
    assert flat == turns[-1].prompt_ids + turns[-1].response_ids
    env = [ids for kind, _, ids in row["segments"] if kind == ENV]
    # what turn t + 1's prompt adds after turn t's prompt and response
    assert env == [
        turns[t + 1].prompt_ids[len(turns[t].prompt_ids) + len(turns[t].response_ids) :]
        for t in range(len(turns) - 1)
    ]


def test_token_view_says_why_when_the_layout_refuses_an_episode():
    episode = Episode("e", turns=[Turn("o", "a", 0.0, prompt_ids=[1, 2], response_ids=[])])
    assert "empty response_ids" in token_view(episode)["unavailable"]


def test_images_are_attached_to_the_observation_they_belong_to_and_only_data_urls_kept():
    episode = Episode(
        "vision:x",
        turns=[
            Turn("<image> q", "a", 0.0, info={"images": [PNG_URL.replace("=", "A=")]}),
            Turn("<image> q2", "b", 1.0, terminated=True, info={"images": [PNG_URL]}),
        ],
        info={"reset_info": {"images": [PNG_URL, "https://example.com/x.png", "javascript:1"]}},
    )
    (view,) = _views([episode])
    assert [s["images"] for s in view["steps"]] == [[PNG_URL], [PNG_URL.replace("=", "A=")]]
    assert view["final_images"] == [PNG_URL]
    assert "images" not in view["steps"][0]["info"]


def test_eval_directory_views_use_the_records_status_seed_and_multi_agent_returns(tmp_path):
    ok = Episode("game:G", seed=123456789, turns=[Turn("obs", "act", 1.0, terminated=True)])
    tool = Episode(
        "game:T",
        turns=[Turn("o", "<python>1</python>", 0.0, info={"tool_calls": [{"name": "python"}]})],
    )
    transcript = {"reset_seed": 5, "truncated_reason": None, "steps": [
        {"observations": {"x": "board"}, "actions": {"x": "1"}, "rewards": {"x": 0.0, "o": 0.0},
         "terminations": {}, "truncations": {}, "infos": {"x": {}, "o": {}}},
        {"observations": {"o": "board2"}, "actions": {"o": "2"}, "rewards": {"x": 1.0, "o": -1.0},
         "terminations": {"x": True, "o": True}, "truncations": {}, "infos": {"x": {}, "o": {}}},
    ]}  # fmt: skip
    two = [
        {"agent": "x", "model": "random", "return": 1.0, "success": True},
        {"agent": "o", "model": "random", "return": -1.0, "success": False},
    ]
    records = [
        _record("game:G", 0, status="failed"),
        _record("game:G", 0, success=True, episode=ok.to_dict()),  # retried: the last wins
        _record("game:T", 1, episode=tool.to_dict()),
        _record("game:G", 2, status="failed"),
        _record("multiagent:TicTacToe-v0", 0, transcript=transcript, results=two),
    ]
    (tmp_path / "episodes.jsonl").write_text("".join(map(to_line, records)))
    views = load_view_episodes(tmp_path)
    assert [(v["env"], v["seed"], v["status"]) for v in views] == [  # in plan order
        ("game:G", 0, "success"),
        ("game:G", 2, "error"),
        ("game:T", 1, "failure"),
        ("multiagent:TicTacToe-v0", 0, "success"),
    ]
    assert views[0]["info"]["reset_seed"] == 123456789
    assert views[1]["error"] == "RuntimeError: boom"
    assert views[2]["steps"][0]["tool_calls"] == [{"name": "python"}]
    ma = views[3]
    assert ma["returns"] == {"x": 1.0, "o": -1.0}
    assert ma["return"] is None
    assert [(s["agent"], s["observation"], s["action"], s["reward"]) for s in ma["steps"]] == [
        ("x", "board", "1", 0.0),
        ("o", "board2", "2", -1.0),
    ]
    assert ma["steps"][1]["info"] == {"rewards_of_other_agents": {"x": 1.0}}


def test_a_turn_with_an_env_error_marks_the_episode_as_an_error(tmp_path):
    episode = Episode("e", turns=[Turn("o", "a", 0.0, truncated=True, info={"error": "timeout"})])
    save_episodes([episode], tmp_path / "e.jsonl")
    (view,) = load_view_episodes(tmp_path / "e.jsonl")
    assert view["status"] == "error"
    assert view["error"] == "timeout"


def test_a_line_that_is_not_an_episode_is_named_in_the_error(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"env_id": "e", "turns": []}\n{"turns": []}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not an episode"):
        load_view_episodes(path)


def test_embedded_json_cannot_end_the_script_element_and_reads_back_exactly():
    data = {"action": PLANTED, "obs": "<!-- -->\u2028", "seed": 2**60, "small": 2**53}
    text = embed_json(data)
    assert not {"<", ">", "&"} & set(text)
    assert json.loads(text) == data


def test_page_has_exactly_its_own_two_scripts_whatever_the_episodes_hold():
    episode = Episode(PLANTED, turns=[Turn(PLANTED, PLANTED, 0.0, info={PLANTED: PLANTED})])
    page = render_html(_views([episode]), title=PLANTED, source=PLANTED)
    assert page.lower().count("<script") == 2
    assert page.lower().count("</script") == 2
    assert "<img" not in page  # title and source are HTML-escaped, the data JSON-escaped
    assert f"<title>{html.escape(PLANTED)}</title>" in page
    assert _data(page)["episodes"][0]["steps"][0]["action"] == PLANTED


def test_content_security_policy_allows_only_the_inlined_script_and_style():
    page = render_html([], title="t")
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    script = re.search(r"<script>(.*)</script>", page, re.S).group(1)
    style = re.search(r"<style>(.*)</style>", page, re.S).group(1)

    def digest(text):
        return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    assert f"script-src 'sha256-{digest(script)}'" in csp
    assert f"style-src 'sha256-{digest(style)}'" in csp
    assert "default-src 'none'" in csp
    assert "img-src data:" in csp
    for unsafe in (".innerHTML", ".outerHTML", "insertAdjacentHTML(", "eval(", "document.write("):
        assert unsafe not in script


def test_tokenizer_gives_the_token_view_text_for_every_id(tmp_path):
    pytest.importorskip("transformers", reason="--tokenizer loads with transformers")
    pytest.importorskip("tokenizers", reason="the tiny tokenizer needs tokenizers")
    from xpgym.reference.tiny_model import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(["guess a number", "too low"], max_number=10)
    tokenizer.save_pretrained(tmp_path / "tok")
    prompt = tokenizer.encode("guess a number")
    first = Turn("guess a number", "3", 0.0, prompt_ids=prompt, response_ids=tokenizer.encode("3"))
    prompt2 = prompt + first.response_ids + tokenizer.encode("too low")
    second = Turn("too low", "7", 1.0, True, prompt_ids=prompt2, response_ids=tokenizer.encode("7"))
    save_episodes([Episode("game:G", turns=[first, second])], tmp_path / "e.jsonl")
    written = write_viewer(
        tmp_path / "e.jsonl", tmp_path / "v.html", tokenizer=str(tmp_path / "tok")
    )
    data = _data(written.path.read_text())
    ids = prompt2 + second.response_ids
    assert set(data["vocab"]) == {str(i) for i in ids}
    assert "".join(data["vocab"][str(i)] for i in ids) == "guess a number3too low7"


def test_view_command_writes_the_page_and_prints_where(tmp_path, capsys):
    out = tmp_path / "golden.html"
    assert main(["view", str(GOLDEN), "-o", str(out)]) == 0
    assert f"wrote {out} (4 episodes)" in capsys.readouterr().out
    assert len(_data(out.read_text())["episodes"]) == 4


def test_view_command_reports_a_missing_input_with_status_2(tmp_path, capsys):
    assert main(["view", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl does not exist" in capsys.readouterr().err


def test_default_output_is_named_after_the_eval_directory_or_the_file(tmp_path):
    (tmp_path / "run1").mkdir()
    assert default_output(tmp_path / "run1") == Path("results/viewer/run1.html")
    assert default_output(tmp_path / "run1" / "episodes.jsonl") == Path("results/viewer/run1.html")
    assert default_output(GOLDEN) == Path("results/viewer/tool_turns.html")


def test_eval_prints_the_view_command_that_opens_its_output(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["eval", "--env", "game:GuessTheNumber-v0-easy", "--model", "random"]
    assert main([*argv, "--episodes", "3", "--out", str(out)]) == 0
    command = f"python -m xpgym view {out}"
    assert command in capsys.readouterr().err
    assert main([*command.split()[3:], "-o", str(tmp_path / "run.html")]) == 0
    views = load_view_episodes(out)
    assert [(v["env"], v["seed"]) for v in views] == [
        ("game:GuessTheNumber-v0-easy", s) for s in range(3)
    ]
