"""LLM providers: OpenAI(-compatible), Azure OpenAI and Anthropic over our own aiohttp session,
Gemini through google-genai."""

from ttc.adapters.providers._anthropic import AnthropicProvider
from ttc.adapters.providers._azure import AzureOpenAIProvider
from ttc.adapters.providers._batch_anthropic import AnthropicBatchAPI
from ttc.adapters.providers._batch_gemini import GeminiBatchAPI
from ttc.adapters.providers._batch_openai import OpenAIBatchAPI
from ttc.adapters.providers._connection import Connection
from ttc.adapters.providers._gemini import GeminiProvider
from ttc.adapters.providers._http import (
    SIM_FINGERPRINT,
    SIM_MODEL_SUFFIX,
    MissingKey,
    api_key_from,
    is_local_url,
    require_env_name,
)
from ttc.adapters.providers._openai import OpenAIProvider
from ttc.adapters.providers._replicas import ReplicasProvider, openai_replicas

__all__ = [
    "SIM_FINGERPRINT",
    "SIM_MODEL_SUFFIX",
    "AnthropicBatchAPI",
    "AnthropicProvider",
    "AzureOpenAIProvider",
    "Connection",
    "GeminiBatchAPI",
    "GeminiProvider",
    "MissingKey",
    "OpenAIBatchAPI",
    "OpenAIProvider",
    "ReplicasProvider",
    "api_key_from",
    "is_local_url",
    "openai_replicas",
    "require_env_name",
]
