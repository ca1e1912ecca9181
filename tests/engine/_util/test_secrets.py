"""Credentials out of URLs, command lines and text: what is taken out, and what is left."""

from __future__ import annotations

import base64

import orjson
import pytest

from ttc.engine._util import (
    REDACTED,
    order_secrets,
    redact,
    redact_argv,
    redact_json,
    redact_parsed,
    redact_url,
    url_credentials,
    withheld,
)
from ttc.engine._util._secrets import is_credential_param


@pytest.mark.parametrize(
    ("url", "shown", "secrets"),
    [
        ("http://user:p%40ss-word@h:8/v1", "http://REDACTED@h:8/v1",
         ("p%40ss-word", "p@ss-word", base64.b64encode(b"user:p@ss-word").decode())),
        ("https://tok_0123456789@h/v1", "https://REDACTED@h/v1", ("tok_0123456789",)),
        ("http://h/v1?key=K1&api-key=K2&Api_Key=K3&token=T&access_token=A&sig=S&model=m",
         "http://h/v1?key=REDACTED&api-key=REDACTED&Api_Key=REDACTED&token=REDACTED"
         "&access_token=REDACTED&sig=REDACTED&model=m",
         ("K1", "K2", "K3", "T", "A", "S")),
        ("http://h/v1?x-goog-api-key=a%2Bb#frag", "http://h/v1?x-goog-api-key=REDACTED#frag",
         ("a%2Bb", "a+b")),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1", ()),
        ("not a url", "not a url", ()),
    ],
)  # fmt: skip
def test_url_credentials_are_taken_out_and_named(
    url: str, shown: str, secrets: tuple[str, ...]
) -> None:
    assert url_credentials(url) == (shown, secrets)
    assert redact_url(shown) == shown  # idempotent
    assert withheld(shown) is bool(secrets)
    assert not withheld(url)


@pytest.mark.parametrize(
    ("name", "credential"),
    [("key", True), ("api-key", True), ("API_KEY", True), ("apikey", True),
     ("subscription-key", True), ("client_secret", True), ("refresh-token", True),
     ("sig", True), ("code", True), ("model", False), ("api-version", False), ("x", False)],
)  # fmt: skip
def test_credential_query_names(name: str, credential: bool) -> None:
    assert is_credential_param(name) is credential


def test_redact_takes_the_longest_secret_first_and_leaves_short_ones() -> None:
    text = "key sk-abc and sk-abcdef, pw abc"
    assert redact(text, ["sk-abc", "sk-abcdef", "abc"]) == (
        f"key {REDACTED} and {REDACTED}, pw abc"
    )
    assert redact(text, None) == text
    assert redact(text, "sk-abcdef") == f"key sk-abc and {REDACTED}, pw abc"


def test_redact_json_copies_every_string_keys_included_however_deep() -> None:
    secret = "sk-0123456789"
    deep: list[object] = [secret]
    for _ in range(5000):  # deeper than the recursion limit
        deep = [deep]
    value = {secret: [secret, {"a": f"x{secret}y", "n": 3, "z": None}], "deep": deep}
    out = redact_json(value, [secret])
    assert out[REDACTED][0] == REDACTED
    assert out[REDACTED][1] == {"a": f"x{REDACTED}y", "n": 3, "z": None}
    assert secret in str(value[secret])  # the original is left as it was
    inner = out["deep"]
    for _ in range(5000):
        inner = inner[0]
    assert inner == [REDACTED]
    assert redact_json(f"a {secret}", secret) == f"a {REDACTED}"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"choices": [{"text": "sk-0123456789"}]}',  # as itself
        b'{"choices": [{"text": "\\u0073k-0123456789"}]}',  # one character escaped
        b'{"sk-0123456789": 1}',  # as a key
        b'{"a": ["x", {"b": "pre sk-0123456789 post\\n"}]}',
    ],
)
def test_a_body_that_spells_the_secret_in_any_way_is_redacted(raw: bytes) -> None:
    out = redact_parsed(raw, orjson.loads(raw), "sk-0123456789")
    assert "sk-0123456789" not in orjson.dumps(out).decode()
    assert REDACTED in orjson.dumps(out).decode()


def test_a_body_that_cannot_hold_the_secret_is_returned_as_it_is() -> None:
    raw = b'{"choices": [{"text": "line one\\nline two"}], "usage": {"total_tokens": 3}}'
    value = orjson.loads(raw)
    assert redact_parsed(raw, value, "sk-0123456789") is value  # no copy, no walk
    # A secret with a character JSON escapes on its own (a slash) is always looked for.
    raw = b'{"text": "a\\/b-0123456789"}'
    assert redact_parsed(raw, orjson.loads(raw), "a/b-0123456789") == {"text": REDACTED}


def test_redact_argv_takes_out_url_credentials_in_both_flag_forms() -> None:
    argv = ["run", "--base-url", "http://u:pw-12345@h/v1", "--embed-base-url=http://h?key=K",
            "--data", "a=b.jsonl"]  # fmt: skip
    assert redact_argv(argv) == ["run", "--base-url", "http://REDACTED@h/v1",
                                 "--embed-base-url=http://h?key=REDACTED",
                                 "--data", "a=b.jsonl"]  # fmt: skip


def test_a_resume_check_compares_and_quotes_endpoints_without_credentials() -> None:
    from ttc.engine import ConfigError, RunConfig
    from ttc.engine.run._runinfo import check_same_run

    now = {"config": RunConfig().to_dict(), "endpoint": "http://REDACTED@h/v1"}
    # A run directory written before credentials were redacted holds the URL as typed.
    check_same_run({**now, "endpoint": "http://me:pw-0123456789@h/v1"}, now, None)
    with pytest.raises(ConfigError, match="--base-url") as caught:
        check_same_run({**now, "endpoint": "http://me:pw-0123456789@other/v1"}, now, None)
    assert "pw-0123456789" not in str(caught.value)


def test_secrets_ordered_once_redact_as_the_same_secrets_given_plain() -> None:
    # A provider orders its secrets once; redaction is the same as for the plain tuple: the
    # longest first (one secret holds the other), short ones left in free text.
    plain = ("sk-abc", "sk-abcdef-long", "xyz")
    ordered = order_secrets(plain)
    assert ordered == ("sk-abcdef-long", "sk-abc")
    assert order_secrets(ordered) is ordered
    text = "key sk-abcdef-long and sk-abc and xyz"
    assert (
        redact(text, ordered) == redact(text, plain) == (f"key {REDACTED} and {REDACTED} and xyz")
    )
    assert redact(text, list(plain)) == redact(text, ordered)


def test_a_key_that_is_no_utf8_is_still_redacted() -> None:
    # os.environ gives a key of bytes that are no UTF-8 as surrogate escapes.
    key = b"sk-abcdefghij\xffklmnop".decode("utf-8", "surrogateescape")
    assert redact(f"an error naming {key}", (key,)) == f"an error naming {REDACTED}"
    raw = b'{"error": "' + key.encode("utf-8", "surrogateescape") + b'"}'
    assert redact_parsed(raw, {"error": key}, (key,)) == {"error": REDACTED}
