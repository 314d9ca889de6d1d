"""``providers.kit.responses``: a vendor answer is its schema or one bounded, one-line error."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from fleet.errors import MalformedResponseError, ProviderError
from providers.kit.responses import EXCERPT_CHARS, excerpt, read_json


class Page(BaseModel):
    items: list[int]


@pytest.mark.parametrize(
    "body, why",
    [
        (b'{"items": [1, 2', "not JSON"),
        (b"<html><body>502</body></html>", "not JSON"),
        (b"{}", "items: Field required"),
        (b'{"items": {"a": 1}}', "items: Input should"),
        (b"", "empty body"),
    ],
)
def test_anything_but_the_schema_is_a_malformed_response_naming_provider_and_call(body, why):
    with pytest.raises(MalformedResponseError) as err:
        read_json(Page, body, provider="vast", what="list instances")
    assert isinstance(err.value, ProviderError) and err.value.retryable and err.value.provider == "vast"
    assert str(err.value).startswith("vast: list instances: the answer could not be read") and why in str(err.value)


def test_a_good_answer_is_read():
    assert read_json(Page, b'{"items": [1, 2], "extra": true}', provider="p", what="w").items == [1, 2]


def test_the_excerpt_is_one_bounded_line_with_control_characters_escaped():
    text = excerpt(b"\x1b]0;owned\x07line one\nfake line: fleet is up" + b"x" * 500)
    assert "\n" not in text and "\x1b" not in text and "\x07" not in text and "\\x1b" in text
    assert len(text) <= EXCERPT_CHARS and text.endswith("...")
    assert excerpt(b"  ") == "(empty body)"
