"""What GitHub would render from a comment, as far as mentions go: the text outside code spans and blocks."""

from markdown_it import MarkdownIt

COMMONMARK = MarkdownIt("commonmark")


def inline_tokens(markdown: str) -> list:
    """Every inline token of the rendered document, in order."""
    inlines = [token for token in COMMONMARK.parse(markdown) if token.type == "inline"]
    return [child for token in inlines for child in token.children]


def text_outside_code(markdown: str) -> str:
    """The rendered text where GitHub would turn `@org/team` into a mention (not code, not HTML)."""
    return "".join(token.content for token in inline_tokens(markdown) if token.type == "text")


def code_contents(markdown: str) -> list[str]:
    """The contents of each code span."""
    return [token.content for token in inline_tokens(markdown) if token.type == "code_inline"]
