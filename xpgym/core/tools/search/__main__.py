"""``python -m xpgym.core.tools.search [--corpus FILE.jsonl] [--host H] [--port N]``: serve
a local index over HTTP with `xpgym.core.tools.search.protocol` (Ctrl-C stops)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from xpgym.core.tools.search.index import LocalSearchIndex, default_search_index
from xpgym.core.tools.search.server import make_search_server

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Serve a local index over HTTP (Ctrl-C stops); the shipped corpus without --corpus."""
    parser = argparse.ArgumentParser(
        prog="python -m xpgym.core.tools.search", description=main.__doc__
    )
    parser.add_argument("--corpus", help="JSONL corpus (default: the shipped one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    backend = LocalSearchIndex.from_jsonl(args.corpus) if args.corpus else default_search_index()
    server = make_search_server(backend, args.host, args.port)
    sys.stderr.write(f"serving {backend!r} at http://{args.host}:{server.server_port}/search\n")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
