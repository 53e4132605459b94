"""The text a model reads for an issue: the same function in training and in serving.

Issue bodies are mostly template: instructions in HTML comments that reporters never delete, empty
issue-form fields, long logs in code blocks. With a budget of a few hundred tokens those crowd out the
words that decide the label, so the body is cleaned before it is cut (docs/BENCHMARKS.md, "Quality").

The model reads the issue's text as GitHub sent it, NUL included (the database stores it without; WordPiece
tokenizers drop NUL anyway, tests/bot/test_bad_input.py shows the same input either way). Only lone
surrogates are removed here: the tokenizers cannot encode them and raise TypeError.
"""

from __future__ import annotations

import re

from core.storable_text import without_surrogates

MAX_BODY_CHARS = 20_000  # a model reads a few hundred tokens: never clean or tokenise a 25 MB body whole
CODE_BLOCK_CHARS = 200  # a fenced block keeps its first characters: the language and the first line
HEAD_SHARE = 0.75  # head+tail truncation keeps this share of the token budget from the start

# An unclosed comment hides the rest of the body on GitHub too; matching to the end keeps this linear.
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_NO_RESPONSE = re.compile(r"^_No response_\s*$", re.M)  # GitHub issue forms' empty fields
_URL = re.compile(r"https?://\S+")
_CODE_BLOCK = re.compile(r"```.*?```", re.S)
_SPACES = re.compile(r"[ \t]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")


def format_issue_text(title: str | None, body: str | None) -> str:
    """Title, blank line, cleaned body (bounded): what every model is trained on and served."""
    body = clean_issue_body((body or "")[:MAX_BODY_CHARS])
    return without_surrogates(f"{(title or '').strip()}\n\n{body}".strip())


def clean_issue_body(body: str | None) -> str:
    """The body without template comments, empty form fields, URLs and the rest of long code blocks."""
    text = _HTML_COMMENT.sub(" ", body or "")
    text = _NO_RESPONSE.sub(" ", text)
    text = _URL.sub("URL", text)
    text = _CODE_BLOCK.sub(_shorten_code_block, text)
    text = _SPACES.sub(" ", text)
    return _BLANK_LINES.sub("\n", text).strip()


def _shorten_code_block(match: re.Match) -> str:
    block = match.group(0)
    return block if len(block) <= CODE_BLOCK_CHARS else block[:CODE_BLOCK_CHARS] + "```"


def shorten_text(text: str, tokenizer, max_length: int) -> str:
    """Head+tail truncation: the first 3/4 and the last 1/4 of the token budget, cut on token boundaries."""
    budget = max_length - len(tokenizer("")["input_ids"])  # room left by [CLS]/[SEP] or <s>/</s>
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    if len(offsets) <= budget:
        return text
    head = int(budget * HEAD_SHARE)
    tail = max(1, budget - head - 1)  # one token of slack for the join, re-tokenised below
    return f"{text[:offsets[head - 1][1]]}\n{text[offsets[-tail][0]:]}"
