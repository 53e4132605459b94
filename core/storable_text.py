"""Text every database accepts: NUL and lone surrogates removed on the way in, by the column types themselves.

GitHub hands us whatever a reporter typed: a NUL ("\\u0000" in the JSON), which PostgreSQL refuses in
text columns, or a lone surrogate ("\\ud800", which Python's json accepts), which neither psycopg nor
sqlite3 can encode as UTF-8. Stripping them in the column type protects every text column on both
backends without a migration (the DDL stays TEXT / VARCHAR). Only those characters are lost.
"""

from __future__ import annotations

import re

from sqlalchemy import String, Text
from sqlalchemy.types import TypeDecorator

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# In a Python str a surrogate is always lone: json.loads joins a valid "\ud83d\ude00" pair into one character.
_SURROGATES = re.compile("[\ud800-\udfff]")


def storable(text: str | None) -> str | None:
    """`text` without the characters PostgreSQL or UTF-8 refuse: NUL and lone surrogates."""
    return _UNSTORABLE.sub("", text) if isinstance(text, str) else text


def without_surrogates(text: str) -> str:
    """`text` without lone surrogates, which no tokenizer (nor UTF-8) can encode."""
    return _SURROGATES.sub("", text)


class StorableText(TypeDecorator):
    """TEXT that drops NUL and lone surrogates when written."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return storable(value)


class StorableString(StorableText):
    """VARCHAR(n) that drops NUL and lone surrogates when written."""

    impl = String
    cache_ok = True
