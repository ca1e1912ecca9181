"""LLM providers: OpenAI(-compatible), Azure OpenAI and Anthropic over our own aiohttp session,
Gemini through google-genai."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttc._lazy import lazy_names

if TYPE_CHECKING:
    from ttc.adapters.providers._anthropic import AnthropicProvider as AnthropicProvider
    from ttc.adapters.providers._azure import AzureOpenAIProvider as AzureOpenAIProvider
    from ttc.adapters.providers._azure import AzureResponsesProvider as AzureResponsesProvider
    from ttc.adapters.providers._batch_anthropic import AnthropicBatchAPI as AnthropicBatchAPI
    from ttc.adapters.providers._batch_gemini import GeminiBatchAPI as GeminiBatchAPI
    from ttc.adapters.providers._batch_openai import OpenAIBatchAPI as OpenAIBatchAPI
    from ttc.adapters.providers._connection import Connection as Connection
    from ttc.adapters.providers._gemini import GeminiProvider as GeminiProvider
    from ttc.adapters.providers._http import SIM_FINGERPRINT as SIM_FINGERPRINT
    from ttc.adapters.providers._http import SIM_MODEL_SUFFIX as SIM_MODEL_SUFFIX
    from ttc.adapters.providers._http import MissingKey as MissingKey
    from ttc.adapters.providers._http import api_key_from as api_key_from
    from ttc.adapters.providers._http import is_local_url as is_local_url
    from ttc.adapters.providers._http import require_env_name as require_env_name
    from ttc.adapters.providers._openai import OpenAIProvider as OpenAIProvider
    from ttc.adapters.providers._openai import OpenAIResponsesProvider as OpenAIResponsesProvider
    from ttc.adapters.providers._replicas import ReplicasProvider as ReplicasProvider
    from ttc.adapters.providers._replicas import openai_replicas as openai_replicas
    from ttc.adapters.providers._sse import Streaming as Streaming
    from ttc.adapters.providers._vendors import VENDOR_URLS as VENDOR_URLS

# Each public name, and the module it is loaded from on first use (`_lazy`).
_HOMES: dict[str, str] = {
    "AnthropicBatchAPI": "ttc.adapters.providers._batch_anthropic",
    "AnthropicProvider": "ttc.adapters.providers._anthropic",
    "api_key_from": "ttc.adapters.providers._http",
    "AzureOpenAIProvider": "ttc.adapters.providers._azure",
    "AzureResponsesProvider": "ttc.adapters.providers._azure",
    "Connection": "ttc.adapters.providers._connection",
    "GeminiBatchAPI": "ttc.adapters.providers._batch_gemini",
    "GeminiProvider": "ttc.adapters.providers._gemini",
    "is_local_url": "ttc.adapters.providers._http",
    "MissingKey": "ttc.adapters.providers._http",
    "openai_replicas": "ttc.adapters.providers._replicas",
    "OpenAIBatchAPI": "ttc.adapters.providers._batch_openai",
    "OpenAIProvider": "ttc.adapters.providers._openai",
    "OpenAIResponsesProvider": "ttc.adapters.providers._openai",
    "ReplicasProvider": "ttc.adapters.providers._replicas",
    "require_env_name": "ttc.adapters.providers._http",
    "SIM_FINGERPRINT": "ttc.adapters.providers._http",
    "SIM_MODEL_SUFFIX": "ttc.adapters.providers._http",
    "Streaming": "ttc.adapters.providers._sse",
    "VENDOR_URLS": "ttc.adapters.providers._vendors",
}

__all__ = [
    "SIM_FINGERPRINT",
    "SIM_MODEL_SUFFIX",
    "VENDOR_URLS",
    "AnthropicBatchAPI",
    "AnthropicProvider",
    "AzureOpenAIProvider",
    "AzureResponsesProvider",
    "Connection",
    "GeminiBatchAPI",
    "GeminiProvider",
    "MissingKey",
    "OpenAIBatchAPI",
    "OpenAIProvider",
    "OpenAIResponsesProvider",
    "ReplicasProvider",
    "Streaming",
    "api_key_from",
    "is_local_url",
    "openai_replicas",
    "require_env_name",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
