"""Private helpers every layer may import: file readers with FILE:LINE errors, writers that
never follow a link, redaction of secrets, the bounded worker pool and work kept off the event
loop."""

from ttc.engine._util._nofollow import open_fd, open_file, temp_file
from ttc.engine._util._records import parse_json, read_bytes, read_json, read_jsonl
from ttc.engine._util._secrets import (
    REDACTED,
    URL_REDACTED,
    basic_token,
    order_secrets,
    redact,
    redact_argv,
    redact_json,
    redact_parsed,
    redact_url,
    url_credentials,
    withheld,
)
from ttc.engine._util._served_lines import Unreadable, served_lines, served_lines_of

__all__ = [
    "REDACTED",
    "URL_REDACTED",
    "Unreadable",
    "basic_token",
    "open_fd",
    "open_file",
    "order_secrets",
    "parse_json",
    "read_bytes",
    "read_json",
    "read_jsonl",
    "redact",
    "redact_argv",
    "redact_json",
    "redact_parsed",
    "redact_url",
    "served_lines",
    "served_lines_of",
    "temp_file",
    "url_credentials",
    "withheld",
]
