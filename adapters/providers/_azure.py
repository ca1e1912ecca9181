"""Azure OpenAI: the OpenAI adapter's bodies, parsing and error tree at Azure's URL and auth.

    POST {endpoint}/openai/deployments/{deployment}/chat/completions?api-version={version}

The model is the deployment's name. The key goes in the `api-key` header (from `api_key`, else
the variable `api_key_env`, AZURE_OPENAI_API_KEY by default); without one, a Microsoft Entra
token from the variable `token_env` (AZURE_OPENAI_AD_TOKEN by default) goes as `Authorization:
Bearer`. `AzureResponsesProvider` sends to the Responses API at Azure's v1 route instead,
`{endpoint}/openai/v1/responses` (no api-version; the deployment is the body's `model`). Azure
takes no `top_k` (never sent). Its 429s carry `retry-after-ms` and `Retry-After`,
its responses `x-ratelimit-remaining-*`: `ttc.adapters.providers._http` reads them as OpenAI's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from ttc.adapters.providers._connection import Connection, check_provider
from ttc.adapters.providers._http import MissingKey, api_key_from, is_local_url, require_env_name
from ttc.adapters.providers._openai import OpenAIProvider
from ttc.engine import ConfigError

__all__ = ["AZURE_API_VERSION", "AzureOpenAIProvider", "AzureResponsesProvider"]

AZURE_API_VERSION = "2024-10-21"
"""The latest generally available version of Azure OpenAI's inference API (data plane)."""
AZURE_KEY_ENV = "AZURE_OPENAI_API_KEY"
AZURE_TOKEN_ENV = "AZURE_OPENAI_AD_TOKEN"


def deployment_url(endpoint: str, deployment: str, api_version: str) -> str:
    """The base URL of a deployment's routes, its api-version in the query (kept on each)."""
    parts = urlsplit(endpoint)
    path = f"{parts.path.rstrip('/')}/openai/deployments/{quote(deployment, safe='')}"
    version = f"api-version={quote(api_version, safe='')}"
    query = f"{parts.query}&{version}" if parts.query else version
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


class AzureOpenAIProvider(OpenAIProvider):
    """Chat completions from an Azure OpenAI `deployment` of the resource at `endpoint`."""

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str,
        api_version: str = AZURE_API_VERSION,
        api_key: str | None = None,
        api_key_env: str | None = AZURE_KEY_ENV,
        token_env: str | None = AZURE_TOKEN_ENV,
        extra_body: Mapping[str, Any] | None = None,
        connection: Connection | None = None,
    ) -> None:
        name = "azure"
        connection = connection or Connection()
        check_provider(name, deployment, endpoint, connection)
        if not api_version.strip():
            raise ConfigError(f"{name}: api_version must not be empty")
        require_env_name(api_key_env, f"{name}: api_key_env")
        require_env_name(token_env, f"{name}: token_env")
        key = api_key_from(api_key, [api_key_env] if api_key_env else [])
        token = None if key else api_key_from(None, [token_env] if token_env else [])
        if key is None and token is None and not is_local_url(endpoint):
            envs = [e for e in (api_key_env, token_env) if e]
            raise MissingKey(name, envs, " for an Azure OpenAI resource")
        super().__init__(
            deployment,
            base_url=deployment_url(endpoint, deployment, api_version.strip()),
            api_key=key or token,
            api_key_env=None,
            name=name,
            send_top_k=False,
            extra_body=extra_body,
            connection=connection,
        )
        resource = self._base.root.rsplit("/openai/deployments/", 1)[0]
        self._responses_url = f"{resource}/openai/v1/responses"
        self.api_version = api_version.strip()
        if key is not None and self._headers.get("Authorization") == f"Bearer {key}":
            del self._headers["Authorization"]
            self._headers["api-key"] = key

    def responses_url(self) -> str:
        """Azure's v1 route of the Responses API (the deployment is the body's `model`)."""
        return self._responses_url

    def __repr__(self) -> str:
        return f"AzureOpenAIProvider(deployment={self.model!r}, base_url={self.base_url!r})"


class AzureResponsesProvider(AzureOpenAIProvider):
    """The Responses API of an Azure OpenAI resource, for its `deployment` (`_responses`)."""

    api = "responses"

    def __repr__(self) -> str:
        return f"AzureResponsesProvider(deployment={self.model!r}, base_url={self.base_url!r})"
