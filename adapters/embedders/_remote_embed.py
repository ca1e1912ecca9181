"""Embedders behind remote APIs: OpenAI `/embeddings` and Gemini `batchEmbedContents`.

They run once per run, in a worker thread, so they use the official synchronous SDK clients
(with the SDKs' own retries off, imported on first use). Each batch of `batch_size` texts is one
request; a rate limit or transient failure is retried a few times here, because no engine loop
sits above an embedder: the waits are the engine's `RetryPolicy` (without jitter), slept in the
embedder's thread and capped at a minute. Failures become the engine's error tree in each
`_translate`, statuses via `ttc.adapters.providers._http.status_error`:

    SDK                                                     ttc
    ─────────────────────────────────────────────────────   ──────────────────────────────────
    status errors (openai.APIStatusError,
      google.genai.errors.APIError)                         as `status_error` says
    connection errors and timeouts
      (openai.APIConnectionError, httpx2.TransportError)    Transient
    a body over `max_response_bytes` (read no further)      ResponseTooLarge (a BadRequest)
    a truncated or non-JSON body                            Transient
    a response of the wrong shape or count                  Fatal

Both SDKs send on an httpx2 client of ours (`capped_http_client`) that reads every body in
chunks up to the cap. `base_url` is shown (repr, messages) without its credentials, and the key
and the URL's credentials are redacted from every message quoted.
"""

from __future__ import annotations

import importlib
import json
import random
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ttc.adapters.providers._capped import MAX_RESPONSE_BYTES, capped_http_client, check_cap
from ttc.adapters.providers._gemini import GEMINI_KEY_ENVS, gemini_errors
from ttc.adapters.providers._http import (
    OPENAI_BASE_URL,
    MissingKey,
    api_key_from,
    is_local_url,
    redact,
    require_env_name,
    status_error,
)
from ttc.engine import ConfigError, Fatal, ProviderError, RetryPolicy, Transient
from ttc.engine._util import url_credentials
from ttc.engine.contract import FloatArray

if TYPE_CHECKING:
    import openai
    from google import genai

__all__ = ["EmbedOptions", "GeminiEmbedder", "OpenAIEmbedder"]

# Full output sizes of the vendors' own models, so `dim` needs no request on their endpoints.
_KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "gemini-embedding-001": 3072,
    "text-embedding-004": 768,
}
_MAX_DELAY_S = 60.0


@dataclass(frozen=True, slots=True)
class EmbedOptions:
    """How a remote embedder sends: texts per request (None: the vendor's default), the vector
    size to ask for (None: the model's own), attempts per batch, the first backoff, each
    request's timeout, and the cap on a response body."""

    batch_size: int | None = None
    dim: int | None = None
    max_attempts: int = 4
    backoff_s: float = 1.0
    timeout_s: float = 120.0
    max_response_bytes: int = MAX_RESPONSE_BYTES


def _http_transport_errors() -> tuple[type[Exception], ...]:
    """The transport errors of the httpx flavours google-genai may run on (httpx2 or httpx)."""
    found: list[type[Exception]] = []
    for module in ("httpx2", "httpx"):
        with suppress(ImportError):
            found.append(importlib.import_module(module).TransportError)
    return tuple(found)


class _RemoteEmbedder:
    """Batching, retrying, dimension learning and normalisation; subclasses send one batch."""

    name: str

    def __init__(self, options: EmbedOptions, default_batch_size: int) -> None:
        batch_size = options.batch_size if options.batch_size is not None else default_batch_size
        dim, max_attempts = options.dim, options.max_attempts
        if batch_size < 1:
            raise ConfigError(f"{self.name}: batch_size must be >= 1, got {batch_size}")
        if dim is not None and dim < 1:
            raise ConfigError(f"{self.name}: dim must be >= 1, got {dim}")
        if max_attempts < 1:
            raise ConfigError(f"{self.name}: max_attempts must be >= 1, got {max_attempts}")
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.backoff_s = options.backoff_s
        self.timeout_s = options.timeout_s
        check_cap(options.max_response_bytes, self.name)
        self.max_response_bytes = options.max_response_bytes
        # No jitter: one thread embeds, so there is no crowd of retries to spread out.
        self._retry = RetryPolicy(
            max_attempts=max_attempts,
            base_delay=options.backoff_s,
            max_delay=_MAX_DELAY_S,
            jitter=0.0,
        )
        self._rng = random.Random(0)
        self._send_dim = dim
        self._dim = dim
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """The vector size: as given, known for the vendor's model, or learned by one request."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed `texts` into an (n, dim) float32 matrix of unit rows, one request per batch."""
        if len(texts) == 0:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [t if t.strip() else " " for t in texts[start : start + self.batch_size]]
            rows.extend(self._with_retry(batch))
        try:
            out = np.asarray(rows, dtype=np.float32)
        except ValueError as exc:  # vectors of different lengths
            raise Fatal(f"{self.name}: unreadable vectors: {exc}") from exc
        if out.ndim != 2 or out.shape[0] != len(texts):
            raise Fatal(f"{self.name}: got vectors of shape {out.shape} for {len(texts)} texts")
        with self._lock:
            if self._dim is None:
                self._dim = out.shape[1]
        if out.shape[1] != self._dim:
            raise Fatal(
                f"{self.name}: got {out.shape[1]}-dimensional vectors, expected {self._dim}"
            )
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.where(norms > 0, norms, 1.0)
        return out

    def _with_retry(self, batch: list[str]) -> list[list[float]]:
        """One batch, retried with exponential backoff while the error is retryable."""
        attempt = 0
        while True:
            attempt += 1
            try:
                vectors = self._request(batch)
            except ProviderError as exc:
                if not self._retry.should_retry(attempt, exc):
                    raise
                # The policy's retry-after floor may pass its ceiling; an embedder never waits
                # more than a minute for one batch.
                time.sleep(min(self._retry.delay(attempt, exc, self._rng), _MAX_DELAY_S))
                continue
            if len(vectors) != len(batch):
                raise Fatal(f"{self.name}: got {len(vectors)} vectors for {len(batch)} texts")
            return vectors

    def _request(self, batch: list[str]) -> list[list[float]]:
        raise NotImplementedError


class OpenAIEmbedder(_RemoteEmbedder):
    """OpenAI `/embeddings` (or a compatible server) with a list input per batch.

    `options.dim`, if given, is requested as `dimensions` (text-embedding-3 models); leave it
    None for servers that do not accept it; `options.batch_size` defaults to 256. The key comes
    from `api_key`, else `api_key_env` (a name: a value that looks like a key is a ConfigError
    that does not repeat it).
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        options: EmbedOptions | None = None,
    ) -> None:
        self.name = f"openai:{model}"
        super().__init__(options or EmbedOptions(), default_batch_size=256)
        require_env_name(api_key_env, f"{self.name}: api_key_env")
        self.model = model
        self._sdk_url = base_url.rstrip("/")
        shown, url_secrets = url_credentials(self._sdk_url)
        self.base_url = shown
        is_openai = self._sdk_url == OPENAI_BASE_URL
        key = api_key_from(api_key, [api_key_env] if api_key_env else [])
        if key is None and is_openai:
            raise MissingKey(self.name, [api_key_env] if api_key_env else [])
        self._key = key
        self._secrets = ((key,) if key else ()) + url_secrets
        if self._dim is None and is_openai:
            self._dim = _KNOWN_DIMS.get(model)
        self._client: openai.OpenAI | None = None

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    def _request(self, batch: list[str]) -> list[list[float]]:
        with self._translate():
            client = self._sdk()
            if self._send_dim is not None:
                response = client.embeddings.create(
                    model=self.model,
                    input=batch,
                    encoding_format="float",
                    dimensions=self._send_dim,
                )
            else:
                response = client.embeddings.create(
                    model=self.model, input=batch, encoding_format="float"
                )
            return [item.embedding for item in sorted(response.data, key=lambda d: d.index)]

    def _sdk(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                import openai

                # A keyless local server ignores the bearer token, but the SDK insists on one.
                self._client = openai.OpenAI(
                    api_key=self._key or "no-key",
                    base_url=self._sdk_url,
                    max_retries=0,
                    timeout=self.timeout_s,
                    http_client=capped_http_client(self.max_response_bytes, self.name),
                )
            return self._client

    @contextmanager
    def _translate(self) -> Iterator[None]:
        """Turns openai SDK failures into the error tree (see the module docstring)."""
        import openai

        try:
            yield
        except ProviderError:
            raise
        except openai.APIStatusError as exc:
            raise status_error(
                exc.status_code,
                exc.response.headers,
                exc.body,
                who=self.name,
                secret=self._secrets,
            ) from None
        except openai.APIConnectionError as exc:
            said = redact(str(exc), self._secrets)
            raise Transient(f"{self.name}: {type(exc).__name__}: {said}") from exc
        except openai.APIResponseValidationError as exc:
            said = redact(str(exc), self._secrets)
            raise Fatal(f"{self.name}: unreadable response: {said}") from exc
        except json.JSONDecodeError as exc:
            raise Transient(f"{self.name}: truncated body (not JSON): {exc}") from exc


class GeminiEmbedder(_RemoteEmbedder):
    """Gemini `batchEmbedContents` through google-genai's `models.embed_content` with a list.

    `options.dim`, if given, is requested as `output_dimensionality`; `options.batch_size`
    defaults to 100. `task_type` (e.g.
    "SEMANTIC_SIMILARITY", the right one for finding similar questions) is part of the name, as
    it changes the vectors. The key comes from `api_key`, else `api_key_env`, else
    GEMINI_API_KEY, else GOOGLE_API_KEY; a local `base_url` may go without one.
    """

    def __init__(
        self,
        model: str = "gemini-embedding-001",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        api_version: str | None = None,
        task_type: str | None = "SEMANTIC_SIMILARITY",
        options: EmbedOptions | None = None,
    ) -> None:
        self.name = f"gemini:{model}" + (f":{task_type.lower()}" if task_type else "")
        super().__init__(options or EmbedOptions(), default_batch_size=100)
        require_env_name(api_key_env, f"{self.name}: api_key_env")
        envs = (api_key_env,) if api_key_env else GEMINI_KEY_ENVS
        key = api_key_from(api_key, envs)
        if key is None and not (base_url is not None and is_local_url(base_url)):
            raise MissingKey(self.name, envs)
        self.model = model
        self._sdk_url = base_url
        shown, url_secrets = url_credentials(base_url) if base_url else (None, ())
        self.base_url = shown
        self.api_version = api_version
        self.task_type = task_type
        self._key = key
        self._secrets = ((key,) if key else ()) + url_secrets
        if self._dim is None and base_url is None:
            self._dim = _KNOWN_DIMS.get(model)
        self._client: genai.Client | None = None

    def __repr__(self) -> str:
        return f"GeminiEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    def _request(self, batch: list[str]) -> list[list[float]]:
        from google.genai import types

        config = types.EmbedContentConfig(
            task_type=self.task_type, output_dimensionality=self._send_dim
        )
        contents: list[types.ContentDict] = [{"parts": [{"text": text}]} for text in batch]
        with self._translate():
            response = self._sdk().models.embed_content(
                model=self.model, contents=contents, config=config
            )
            return [list(e.values or ()) for e in response.embeddings or ()]

    def _sdk(self) -> genai.Client:
        with self._lock:
            if self._client is None:
                from google import genai
                from google.genai import types

                options = types.HttpOptions(
                    base_url=self._sdk_url,
                    api_version=self.api_version,
                    timeout=round(self.timeout_s * 1000),
                    retry_options=types.HttpRetryOptions(attempts=1),
                    httpx_client=capped_http_client(self.max_response_bytes, self.name),
                )
                self._client = genai.Client(
                    vertexai=False, api_key=self._key or "no-key", http_options=options
                )
            return self._client

    def _translate(self) -> AbstractContextManager[None]:
        return gemini_errors(self.name, self._secrets, _http_transport_errors())
