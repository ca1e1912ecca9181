"""`ttc serve`'s Azure OpenAI routes: OpenAI's wire format at Azure's deployment paths.

    POST /openai/deployments/{deployment}/chat/completions    a chat completion
    POST /openai/deployments/{deployment}/embeddings          embeddings

The deployment names the model (a body without `model` gets it); bodies, errors and the
x-ratelimit-* headers are OpenAI's (`_wire_openai`). The `api-version` query is not checked.
"""

from __future__ import annotations

from typing import Any

from ttc.adapters.sim._admission import Refusal
from ttc.adapters.sim._wire import Call, EmbedCall, Route, Vectors
from ttc.adapters.sim._wire_openai import OPENAI
from ttc.engine import Completion

__all__ = ["AZURE"]

_PREFIX = "/openai/deployments/"
_ACTIONS = {
    "chat/completions": ("generate", "azure.generate"),
    "embeddings": ("embed", "azure.embed"),
}


class _Azure:
    """Azure's deployment routes over OpenAI's bodies and envelope."""

    name = "azure"
    rate_headers = True

    def route(self, path: str) -> Route | None:
        if not path.startswith(_PREFIX):
            return None
        deployment, _, action = path[len(_PREFIX) :].partition("/")
        known = _ACTIONS.get(action)
        if not deployment or known is None:
            return None
        return Route("POST", known[0], known[1], deployment)

    def claims(self, path: str) -> bool:
        return path.startswith(_PREFIX)

    def error(self, status: int, message: str, kind: str = "", code: str | None = None) -> bytes:
        return OPENAI.error(status, message, kind, code)

    def refusal(self, refusal: Refusal) -> bytes:
        return OPENAI.refusal(refusal)

    def parse(self, body: dict[str, Any], route: Route) -> Call:
        return OPENAI.parse({"model": route.model, **body}, route)

    def body(self, call: Call, completion: Completion, serial: int) -> dict[str, Any]:
        return OPENAI.body(call, completion, serial)

    def parse_embed(self, body: dict[str, Any], route: Route) -> EmbedCall:
        return OPENAI.parse_embed({"model": route.model, **body}, route)

    def embed_body(self, call: EmbedCall, vectors: Vectors, tokens: int) -> dict[str, Any]:
        return OPENAI.embed_body(call, vectors, tokens)


AZURE = _Azure()
"""The Azure OpenAI routes."""
