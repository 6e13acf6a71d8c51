"""The trajectory viewer in a real headless browser: Debian's chromium and chromedriver,
driven with selenium (``bash scripts/setup.sh`` installs all three; without them these tests
skip, naming what is missing). `xpgym.viewer.browser` starts the browser: the system driver,
selenium offline, a fresh profile. The screenshot is written to
``results/viewer/screenshot.png`` (CI keeps it as an artifact).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from xpgym.core.trajectory import Episode, Turn, load_episodes, save_episodes
from xpgym.viewer import write_viewer
from xpgym.viewer.browser import browser_missing, headless_chromium, open_page

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "parity" / "tokens" / "golden" / "tool_turns.jsonl"
SCREENSHOT = ROOT / "results" / "viewer" / "screenshot.png"
WAIT_S = 120  # generous: the machine may be loaded; nothing here asserts on durations

MISSING = browser_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"needs a headless Chromium: {MISSING}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium() as driver:
        yield driver


def _shown(browser) -> int:
    return int(browser.find_element("id", "count").get_attribute("data-shown"))


def _wait_shown(browser, expected: int) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, WAIT_S).until(lambda d: _shown(d) == expected)


def _select(browser, element_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", element_id)).select_by_value(value)


def _search(browser, text: str) -> None:
    box = browser.find_element("id", "search")
    box.clear()
    box.send_keys(text)


def _status(i: int) -> str:
    """The status of synthetic episode i: an env error when i % 5 == 4, else a success when
    i % 3 == 0 (all of env ``game:Env0-v0``), else a failure."""
    return "error" if i % 5 == 4 else ("success" if i % 3 == 0 else "failure")


def _count(n: int, status: str | None = None, env: int | None = None) -> int:
    return sum(
        (status is None or _status(i) == status) and (env is None or i % 3 == env) for i in range(n)
    )


def _episodes(n: int) -> list[Episode]:
    """`n` synthetic episodes over three envs (episode i is ``game:Env<i % 3>-v0``) with the
    statuses of `_status`; the last action of episode i holds the unique word
    ``needle-<i>``."""
    episodes = []
    for i in range(n):
        turns = [
            Turn(f"observation {i}.{t} " + "text " * 20, f"action {t}", 0.0, info={"turn": t})
            for t in range(i % 4)
        ]
        status = _status(i)
        reward = 1.0 if status == "success" else 0.0
        info = {"error": "TimeoutError: step took too long"} if status == "error" else {}
        last = Turn(f"last observation {i}", f"needle-{i} answer", reward, True, info=info)
        episodes.append(Episode(f"game:Env{i % 3}-v0", seed=i, turns=[*turns, last]))
    return episodes


@pytest.fixture(scope="module")
def small_page(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("viewer")
    save_episodes(_episodes(30), folder / "episodes.jsonl")
    return write_viewer(folder / "episodes.jsonl", folder / "small.html").path


def test_page_renders_the_episode_list_and_opens_the_first_episode(browser, small_page):
    open_page(browser, small_page, timeout=WAIT_S)
    assert browser.find_element("id", "count").text == "30 of 30 episodes"
    rows = browser.find_elements("css selector", "#list .ep-row")
    assert rows[0].text.split() == ["0", "game:Env0-v0", "0", "1", "1", "success"]
    actions = browser.find_elements("css selector", "#detail pre.action")
    assert [a.text for a in actions] == ["needle-0 answer"]


def test_seeds_beyond_javascripts_exact_integers_are_shown_digit_for_digit(browser, tmp_path):
    seed = 2**63 - 1  # JavaScript numbers would round it to 9223372036854775808
    episode = Episode("e", seed=seed, turns=[Turn("o", "a", 0.5, info={"reset_seed": seed})])
    save_episodes([episode], tmp_path / "e.jsonl")
    open_page(browser, write_viewer(tmp_path / "e.jsonl", tmp_path / "e.html").path)
    row = browser.find_element("css selector", "#list .ep-row")
    assert row.find_elements("css selector", "span")[2].get_attribute("textContent") == str(seed)
    detail = browser.find_element("id", "detail").get_attribute("textContent")
    assert str(seed) in detail
    assert "0.500" in detail


def test_status_and_env_filters_change_the_count(browser, small_page):
    open_page(browser, small_page, timeout=WAIT_S)
    _select(browser, "status-filter", "success")
    _wait_shown(browser, _count(30, "success"))
    _select(browser, "env-filter", "game:Env1-v0")
    _wait_shown(browser, 0)  # Env1 holds i % 3 == 1: never a success
    _select(browser, "status-filter", "failure")
    _wait_shown(browser, _count(30, "failure", env=1))
    statuses = {r.text.split()[-1] for r in browser.find_elements("css selector", ".ep-row")}
    assert statuses == {"failure"}
    _select(browser, "status-filter", "error")
    _wait_shown(browser, _count(30, "error", env=1))
    row = browser.find_element("css selector", ".ep-row")
    assert row.get_attribute("title") == "TimeoutError: step took too long"


def test_search_finds_the_episode_whose_text_matches(browser, small_page):
    open_page(browser, small_page, timeout=WAIT_S)
    _search(browser, "NEEDLE-17")
    _wait_shown(browser, 1)
    (row,) = browser.find_elements("css selector", "#list .ep-row")
    row.click()
    assert browser.find_element("css selector", "#detail h2").text == "Episode 17: game:Env2-v0"
    _search(browser, "observation 7.2")
    _wait_shown(browser, 1)


def test_token_view_and_screenshot_of_a_golden_file(browser, tmp_path):
    page = write_viewer(GOLDEN, tmp_path / "golden.html").path
    open_page(browser, page, timeout=WAIT_S)
    first = load_episodes(GOLDEN)[0]
    policy = browser.find_elements("css selector", "#detail .token-row .seg.policy .tok")
    assert [int(t.text) for t in policy] == [i for turn in first.turns for i in turn.response_ids]
    every = browser.find_elements("css selector", "#detail .token-row .tok")
    assert [int(t.text) for t in every] == first.turns[-1].prompt_ids + first.turns[-1].response_ids
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT))
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ten_thousand_episodes_load_filter_and_search(browser, tmp_path):
    n = 10_000
    save_episodes(_episodes(n), tmp_path / "episodes.jsonl")
    page = write_viewer(tmp_path / "episodes.jsonl", tmp_path / "big.html").path
    open_page(browser, page, timeout=WAIT_S)
    assert _shown(browser) == n
    # the list is virtual: only the rows in view (and a margin) are in the DOM
    assert len(browser.find_elements("css selector", "#list .ep-row")) < 200
    _select(browser, "status-filter", "success")
    _wait_shown(browser, _count(n, "success"))
    _select(browser, "env-filter", "game:Env0-v0")
    _wait_shown(browser, _count(n, "success", env=0))
    _select(browser, "status-filter", "error")
    _wait_shown(browser, _count(n, "error", env=0))
    _select(browser, "status-filter", "")
    _search(browser, "needle-9999")
    _wait_shown(browser, 1)
    browser.find_element("css selector", "#list .ep-row").click()
    assert browser.find_element("css selector", "#detail h2").text == "Episode 9999: game:Env0-v0"
    browser.execute_script("arguments[0].scrollTop = 1e9", browser.find_element("id", "list"))


PLANTED = {
    "script": "<script>window.__pwned = 'script'; document.title = 'pwned'</script>",
    "img": "<img src=x onerror=\"window.__pwned = 'img'; document.title = 'pwned'\">",
    "end": "</script><script>window.__pwned = 'end'</script>",
    "svg": "<svg onload=\"window.__pwned = 'svg'\"></svg><b>bold</b> &amp; <!--",
}


def test_planted_html_in_model_text_is_shown_literally_and_never_runs(browser, tmp_path):
    text = " ".join(PLANTED.values())
    messages = [
        {"role": "user", "content": PLANTED["img"]},
        {"role": "assistant", "content": [{"type": "text", "text": PLANTED["svg"]}]},
    ]
    tool_call = {"name": PLANTED["script"], "arguments": PLANTED["end"], "ok": False}
    turns = [
        Turn(messages, PLANTED["end"], 0.0, info={"tool_calls": [tool_call]}),
        Turn(text, text, 1.0, terminated=True, info={PLANTED["img"]: PLANTED["script"]}),
    ]
    info = {"reset_info": {"images": ["javascript:window.__pwned='url'", PLANTED["img"]]}}
    save_episodes([Episode(PLANTED["svg"], turns=turns, info=info)], tmp_path / "e.jsonl")
    page = write_viewer(tmp_path / "e.jsonl", tmp_path / "planted.html", title=text).path
    open_page(browser, page, timeout=WAIT_S)
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.title == text  # set from the escaped <title>, never by planted script
    assert len(browser.find_elements("css selector", "script")) == 2
    assert browser.find_elements("css selector", "#detail img, #detail svg, #detail b") == []
    actions = browser.find_elements("css selector", "#detail pre.action")
    assert [a.get_attribute("textContent") for a in actions] == [PLANTED["end"], text]
    detail = browser.find_element("id", "detail").get_attribute("textContent")
    for planted in PLANTED.values():
        assert planted in detail
    env_cell = browser.find_elements("css selector", "#list .ep-row span")[1]
    assert env_cell.get_attribute("textContent") == PLANTED["svg"]
    _search(browser, "onerror")  # searching builds the search text: still nothing runs
    _wait_shown(browser, 1)
    assert browser.execute_script("return window.__pwned === undefined")
