"""The text a model reads: template boilerplate out, the reporter's words in, bounded size."""

from core.issue_text import (
    CODE_BLOCK_CHARS,
    MAX_BODY_CHARS,
    clean_issue_body,
    format_issue_text,
    shorten_text,
)
from trainer.config import offline_minilm_path


def test_template_boilerplate_is_removed_and_the_words_stay():
    body = ("<!-- Please describe the bug -->\n### Issue type\n\nBug\n\n"
            "### Python version\n\n_No response_\n\nSee https://example.com/x?y=1 for   details\n\n\n```python\n" + "x = 1\n" * 100 + "```")
    cleaned = clean_issue_body(body)
    assert "Please describe" not in cleaned and "_No response_" not in cleaned
    assert "### Issue type\nBug" in cleaned and "See URL for details" in cleaned
    assert cleaned.endswith("```") and len(cleaned) < 100 + CODE_BLOCK_CHARS  # the block keeps its start


def test_an_unclosed_comment_hides_the_rest_as_on_github():
    assert clean_issue_body("Crash on save <!-- left over from the template\nnever closed") == "Crash on save"


def test_many_unclosed_comments_are_cleaned_in_one_pass():
    # each unclosed "<!--" would rescan to the end if the pattern required "-->": quadratic on hostile bodies
    assert clean_issue_body("words " + "<!--" * 5000) == "words"


def test_empty_body_cleans_to_empty():
    assert clean_issue_body(None) == "" and clean_issue_body("  \n\n ") == ""
    assert format_issue_text("Crash on start", None) == "Crash on start"


def test_the_text_is_title_then_cleaned_body():
    text = format_issue_text("  Crash on start ", "<!-- template -->\nSteps:\n1. run")
    assert text == "Crash on start\n\nSteps:\n1. run"


def test_a_huge_body_is_cut_before_it_is_cleaned():
    text = format_issue_text("Huge", "a" * (50 * MAX_BODY_CHARS))
    assert len(text) == len("Huge\n\n") + MAX_BODY_CHARS


def test_head_tail_keeps_the_start_and_the_end():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(offline_minilm_path())  # what a fine-tuned MiniLM carries
    text = "crash on startup " + "filler words " * 100 + "expected it to work"
    short = shorten_text(text, tokenizer, 32)
    assert short.startswith("crash on startup") and short.endswith("expected it to work")
    assert len(tokenizer(short)["input_ids"]) <= 33  # the join may add a token; encode() truncates
    assert shorten_text("short text", tokenizer, 32) == "short text"
