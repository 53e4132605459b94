import pytest

from bot.intake.signatures import sign_body, verify_signature

SECRET = "It's a Secret to Everybody"
BODY = b"Hello, World!"
# GitHub's documented test vector for X-Hub-Signature-256.
GITHUB_EXAMPLE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_signature_matches_githubs_documented_example():
    assert sign_body(BODY, SECRET) == GITHUB_EXAMPLE
    assert verify_signature(BODY, GITHUB_EXAMPLE, SECRET)


@pytest.mark.parametrize("header", [None, "", "sha256=", "sha1=757107ea0eb2509fc211221cce984b8a37570b6d",
                                    GITHUB_EXAMPLE.upper(), GITHUB_EXAMPLE[:-1] + "f",
                                    GITHUB_EXAMPLE[:-1] + "é", "sha256=\u00c3\u00a9"])
def test_missing_or_wrong_signatures_are_rejected(header):
    assert not verify_signature(BODY, header, SECRET)


def test_a_changed_body_or_secret_fails_verification():
    assert not verify_signature(BODY + b" ", GITHUB_EXAMPLE, SECRET)
    assert not verify_signature(BODY, GITHUB_EXAMPLE, SECRET + "!")


def test_an_empty_secret_never_verifies():
    assert not verify_signature(BODY, sign_body(BODY, ""), "")
