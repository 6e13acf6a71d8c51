"""Time the trajectory viewer on many episodes in headless Chromium: write, load, filter, search.

1. ``xpgym eval`` plays ``--episodes`` episodes of ``--env`` with the ``random`` model (the
   env's own random actions) into ``--work-dir`` (reused when it already holds them);
2. `xpgym.viewer.write_viewer` writes the page (timed; its size is reported);
3. Debian's chromium (`xpgym.viewer.browser`) opens it; the page's own clock
   (``performance.now()``) measures, in the page: the load (navigation start to the end of
   the script that builds the list), a status filter and an env filter (synchronous), and
   two searches (the first builds the search text of every episode; both include the 150 ms
   input debounce).

    python scripts/bench_viewer.py [--episodes 10000] [--env game:GuessTheNumber-v0-easy]

Writes ``--out`` (default ``results/viewer/bench.json``) and prints it. Timings depend on the
machine and its load; docs/benchmarks.md ("Trajectory viewer") records measured runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from xpgym.eval import EvalConfig, run_eval
from xpgym.viewer import write_viewer
from xpgym.viewer.browser import browser_missing, headless_chromium, open_page

_FILTER = """
const [id, value] = arguments;
const select = document.getElementById(id);
const t0 = performance.now();
select.value = value;
select.dispatchEvent(new Event("change"));
return [performance.now() - t0, Number(document.getElementById("count").dataset.shown)];
"""

_SEARCH = """
const [query, done] = arguments;
const box = document.getElementById("search");
const count = document.getElementById("count");
const before = count.textContent;
const t0 = performance.now();
box.value = query;
box.dispatchEvent(new Event("input"));
(function poll() {
  if (count.textContent !== before) done([performance.now() - t0, Number(count.dataset.shown)]);
  else setTimeout(poll, 1);
})();
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--env", default="game:GuessTheNumber-v0-easy")
    parser.add_argument("--work-dir", default="results/viewer/bench-episodes")
    parser.add_argument("--out", default="results/viewer/bench.json")
    args = parser.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"needs a headless Chromium: {missing}", file=sys.stderr)
        return 2

    print(f"playing {args.episodes} random episodes of {args.env} into {args.work_dir} ...")
    config = EvalConfig(envs=[args.env], out=args.work_dir, model="random", episodes=args.episodes)
    run_eval(config)
    start = time.perf_counter()
    page = write_viewer(args.work_dir, Path(args.work_dir).with_suffix(".html"))
    write_s = time.perf_counter() - start
    print(f"wrote {page.path} ({page.episodes} episodes) in {write_s:.1f} s; opening it ...")

    with headless_chromium() as browser:
        open_page(browser, page.path, timeout=600)
        load_ms = browser.execute_script(
            "return performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
        )
        timings = {"load_ms": round(load_ms, 1)}
        for name, (element, value) in {
            "filter_status_success": ("status-filter", "success"),
            "filter_env": ("env-filter", args.env),
            "filter_status_all": ("status-filter", ""),
        }.items():
            ms, shown = browser.execute_script(_FILTER, element, value)
            timings[name] = {"ms": round(ms, 1), "shown": shown}
        browser.set_script_timeout(600)
        for name, query in (("search_first", "\\boxed{7}"), ("search_again", "\\boxed{3}")):
            ms, shown = browser.execute_async_script(_SEARCH, query)
            timings[name] = {"ms": round(ms, 1), "shown": shown}
        rows_in_dom = browser.execute_script("return document.querySelectorAll('.ep-row').length")

    result = {
        "episodes": page.episodes,
        "env": args.env,
        "html_bytes": page.path.stat().st_size,
        "write_s": round(write_s, 2),
        "browser_ms": timings,
        "rows_in_dom": rows_in_dom,
        "machine": f"{platform.machine()}, {platform.python_version()}",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
