"""Pages of the listings that grow with history, and their encoded bytes kept.

A listing answers at most `limit` rows (at most MAX_PAGE) after the cursor `after` (the
last id the caller has), oldest first; a cut answer carries
`Link: <path?after=<its last id>&limit=<limit>>; rel="next"`.

Encoding 10,000 observations costs the server ~100 ms of float formatting. A page's
bytes are fixed by what it was cut from: a history only grows at its end, so the rows
after a cursor, their count and the last one's id name the page, and the same page
asked again (another tab, a client reading the whole front) is answered from the
bytes kept, not encoded again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable, Mapping, Sequence
from urllib.parse import urlencode

from starlette.responses import Response

from ...limits import MAX_PAGE
from ._render import encode_off_loop

__all__ = ["EncodedPages", "cut", "page_limit"]


def page_limit(asked: int | None, most: int = MAX_PAGE) -> int:
    """The rows an answer holds at most: `asked`, or `most` when none or more."""
    return min(asked or most, most)


def cut(
    rows: Sequence[Any], path: str, limit: int, filters: Mapping[str, Any] | None = None
) -> tuple[Sequence[Any], dict[str, str] | None]:
    """The first `limit` of `rows`, with the Link header to the rest when some are left
    (the listing's `filters` that are set carried on in it)."""
    if len(rows) <= limit:
        return rows, None
    page = rows[:limit]
    query = {"after": page[-1].id, "limit": limit}
    query.update((k, str(v).lower() if isinstance(v, bool) else v) for k, v in (filters or {}).items() if v is not None)
    return page, {"Link": f'<{path}?{urlencode(query)}>; rel="next"'}


class EncodedPages:
    """Encoded answers by the key that names their content, the last read kept
    within `max_bytes` (the one just read always)."""

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self._max_bytes = max_bytes
        self._size = 0
        self._held: OrderedDict[Hashable, tuple[bytes, Mapping[str, str] | None, int]] = OrderedDict()

    async def answer(
        self, key: Hashable, rows: Sequence[Any], path: str, limit: int, encode: Callable[[Sequence[Any]], bytes]
    ) -> tuple[Response, int]:
        """The page of `rows` (from the first) and how many rows it holds; `key` names
        `rows` as given (its count and last id are added here)."""
        key = (key, limit, len(rows), (rows[-1].id, rows[-1].created_at) if rows else None)
        held = self._held.pop(key, None)
        if held is None:
            page, link = cut(rows, path, limit)
            body = await encode_off_loop(lambda: encode(page), len(page))
            held = (body, link, len(page))
            self._size += len(body)
        self._held[key] = held
        while len(self._held) > 1 and self._size > self._max_bytes:
            self._size -= len(self._held.popitem(last=False)[1][0])
        body, headers, count = held
        return Response(body, headers=headers, media_type="application/json"), count
