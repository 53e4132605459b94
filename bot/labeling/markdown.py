"""Markdown for the bot's comments: outside text written so that it renders as itself and pings nobody."""

from __future__ import annotations

import re

BACKTICKS = re.compile(r"`+")


def code_span(text: str) -> str:
    """`text` as a CommonMark code span, where `@org/team` mentions and `#12` links nothing.

    The fence is one backtick longer than the longest run inside; a space pads a value that starts or ends
    with a backtick or a space (CommonMark strips one from each side). Line breaks become spaces, since a
    blank line would end the paragraph, and the span with it.
    """
    text = " ".join(text.splitlines())
    fence = "`" * (max((len(run) for run in BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.strip() and (text[0] in "` " or text[-1] in "` ") else ""
    return f"{fence}{pad}{text or ' '}{pad}{fence}"
