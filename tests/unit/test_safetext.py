"""``fleet.safetext``: provider text as one escaped line with every known secret and
credential-shaped string masked (issue 28, part 2)."""

from __future__ import annotations

import pytest

from fleet.errors import ProviderError
from fleet.safetext import escape, register_environ, register_secret, safe, scrub

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\r\nfake line: fleet is up\t\u202eevil\x9b31m"


def test_control_characters_are_written_out_on_one_line():
    out = escape(HOSTILE)
    assert out == "\\x1b]0;pwned\\x07\\x1b[2J\\r\\nfake line: fleet is up\\t\\u202eevil\\x9b31m"
    assert out.isprintable() and escape(out) == out  # escaping twice changes nothing


@pytest.mark.parametrize(
    "text, secret",
    [
        ("echoed Authorization: Bearer abcDEF123456789xyz", "abcDEF123456789xyz"),
        ("{'Authorization': 'Basic dXNlcjpwYXNzd29yZA=='}", "dXNlcjpwYXNzd29yZA=="),
        ("key AKIAIOSFODNN7EXAMPLE and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AKIAIOSFODNN7EXAMPLE"),
        (
            "key AKIAIOSFODNN7EXAMPLE and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        (
            "AccountName=a;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZ==;",
            "Eby8vdM02x",
        ),
        ("GET https://a.blob.core.windows.net/c/x?sv=2022-11-02&sig=AbC%2Fdef123&se=2030", "AbC%2Fdef123"),
        ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2hlcmU rejected", "eyJhbGciOiJIUzI1NiJ9"),
        ("refused ya29.a0AfH6SMBx3dkj_hd83jdkJDKS3kd", "ya29.a0AfH6SMBx3dkj"),
        ('{"password": "hunter2hunter2", "client_secret": "s3cr3t-value"}', "hunter2hunter2"),
        ('{"password": "hunter2hunter2", "client_secret": "s3cr3t-value"}', "s3cr3t-value"),
        ("session=0123456789abcdef0123456789abcdef0123 expired", "0123456789abcdef0123456789abcdef0123"),
        ("could not connect to postgresql://fleet:pg-pass-word@db:5432/fleet", "pg-pass-word"),
    ],
)
def test_credential_shaped_strings_are_masked(text, secret):
    out = scrub(text)
    assert secret not in out and "***" in out
    assert scrub(out) == out


def test_registered_and_known_values_are_masked_wherever_they_appear():
    register_secret("operator-vast-key-123")
    register_secret("abc")  # too short to mask safely: ignored
    assert scrub("echo operator-vast-key-123 abc", known=["resolved-from-env"]) == "echo *** abc"
    assert scrub("got resolved-from-env", known=["resolved-from-env"]) == "got ***"
    register_environ(
        {
            "MY_API_KEY": "value-of-my-api-key",
            "ARM_CLIENT_SECRET": "4f1c-client-secret",
            "AWS_DEFAULT_REGION": "eu-north-1",
            "HOME": "/root/x",
        }
    )
    assert scrub("value-of-my-api-key 4f1c-client-secret /root/x eu-north-1") == "*** *** /root/x eu-north-1"


def test_ordinary_provider_text_is_kept():
    text = (
        "create on ask 3001: Instance type no longer available [no_such_ask]; the token expires; "
        "commit 0123456789abcdef0123456789abcdef01234567 in us-east-1a"
    )
    assert safe(text) == text


def test_a_provider_error_is_safe_when_it_is_made():
    register_secret("fake-vast-key-for-errors")
    err = ProviderError(
        "vast",
        f"rejected Authorization: Bearer fake-vast-key-for-errors{HOSTILE}",
        region="us\x1b[2J",
        code="bad\ncode",
    )
    for text in (str(err), err.message, err.region, err.code):
        assert "fake-vast-key" not in text and text.isprintable()
    assert "fake line: fleet is up" in err.message
