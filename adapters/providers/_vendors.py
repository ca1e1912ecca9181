"""The vendors' own API base URLs, used where no --base-url is given: a module of constants
only, so that the command line names them (a quota's key, `ttc batch`'s default) without
loading a provider."""

from __future__ import annotations

__all__ = ["ANTHROPIC_BASE_URL", "GEMINI_BASE_URL", "OPENAI_BASE_URL", "VENDOR_URLS"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"

# By provider kind, as `--provider` names it.
VENDOR_URLS = {
    "openai": OPENAI_BASE_URL,
    "anthropic": ANTHROPIC_BASE_URL,
    "gemini": GEMINI_BASE_URL,
}
