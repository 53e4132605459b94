"""bot.labeling.markdown: a value in a code span renders as itself, checked with a CommonMark parser."""

import pytest

from bot.labeling.markdown import code_span
from tests.bot.labeling.commonmark import code_contents, inline_tokens, text_outside_code


@pytest.mark.parametrize("value", ["bug", "@org/team", "type: bug", "a`b", "`x`", "a``b`", "``", " a", "b ",
                                   "#12 <b>x</b> [l](http://e) **not bold** \\*"])
def test_a_code_span_renders_as_exactly_the_value(value):
    tokens = inline_tokens(f"labelled {code_span(value)} today")
    assert [t.type for t in tokens] == ["text", "code_inline", "text"] and tokens[1].content == value


def test_a_line_break_in_a_value_becomes_a_space_so_the_span_cannot_be_ended():
    comment = f"- {code_span('x' + chr(10) * 2 + '@org/team')}"
    assert code_contents(comment) == ["x  @org/team"] and "@" not in text_outside_code(comment)
