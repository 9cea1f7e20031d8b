"""One OS process of the two-process recall test (`tests/recall/test_postgres_index.py`).

Run as ``python -m tests.recall.postgres_recall_process DSN PREFIX THREAD OP ...``:

- ``index FIRST LAST BATCH GO [reverse]``: open a `PostgresRecallIndex` (this creates the
  tables, racing with the other process), print ``{"ready": true}``, wait until the file
  ``GO`` exists, then index messages ``FIRST..LAST-1`` of `corpus_message` in batches of
  ``BATCH`` message ids (last batch first with ``reverse``); print ``{"added": n}``.
- ``search TERM...``: print ``{"hits": [message id, ...]}``, best first.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ctxpolicy.recall.postgres import PostgresRecallIndex
from ctxpolicy.recall.units import Unit, split_text

#: Seconds to wait for the GO file.
GO_TIMEOUT_S = 60


def message_id(i: int) -> str:
    return f"m{i:05d}"


def corpus_message(i: int) -> tuple[int, str, list[Unit]]:
    """Message ``i``: a 4-line tool dump, so 4 units, one holding ``item<i>``'s code."""
    text = "\n".join(
        [
            f"$ inventory --page {i}",
            f"item{i} code {i * 7919 % 100_003:06d} stored in bay{i % 17}",
            f"checksum ok for page {i}",
            "end of page",
        ]
    )
    mid = message_id(i)
    return i, mid, split_text(text, message_id=mid, position=i, role="tool", tool="inventory")


def main(argv: list[str]) -> None:
    dsn, prefix, thread, op, *rest = argv
    index = PostgresRecallIndex(dsn, schema_prefix=prefix)
    try:
        if op == "index":
            first, last, batch = int(rest[0]), int(rest[1]), int(rest[2])
            go = Path(rest[3])
            reverse = rest[4:] == ["reverse"]
            print(json.dumps({"ready": True}), flush=True)
            deadline = time.monotonic() + GO_TIMEOUT_S
            while not go.exists():
                if time.monotonic() > deadline:
                    raise SystemExit("GO file never appeared")
                time.sleep(0.005)
            starts = list(range(first, last, batch))
            if reverse:
                starts.reverse()
            added = 0
            for start in starts:
                entries = [corpus_message(i) for i in range(start, min(start + batch, last))]
                added += index.add_messages(thread, entries)
            print(json.dumps({"added": added}), flush=True)
        elif op == "search":
            hits = index.search(thread, rest, limit=20)
            print(json.dumps({"hits": [hit.unit.message_id for hit in hits]}), flush=True)
        else:
            raise SystemExit(f"unknown op {op!r}")
    finally:
        index.close()


if __name__ == "__main__":
    main(sys.argv[1:])
