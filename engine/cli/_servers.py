"""Many servers of one model: `--base-url` given more than once (`ttc.adapters.providers.
ReplicasProvider`). One --base-url is a single provider, as it always was (`_wiring`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttc.engine import ConfigError

if TYPE_CHECKING:
    from ttc.adapters.providers import ReplicasProvider
    from ttc.engine.cli._spec import RunSpec

# A replica's own deadline, as a share of --timeout: inside the engine's, so that a replica that
# does not answer is seen failing (and counted against it) before the engine gives up the attempt.
REPLICA_DEADLINE = 0.95


def one_url(urls: str | tuple[str, ...] | None) -> str | None:
    """One --base-url: the only one, or the first replica's (where one server is asked, e.g.
    for the model's name)."""
    return urls[0] if isinstance(urls, tuple) else urls


def many_from(spec: RunSpec) -> ReplicasProvider | None:
    """The policy model across the replicas of a repeated --base-url, or None for one URL."""
    urls = spec.provider.base_url
    if not isinstance(urls, tuple):
        return None
    return replicas(spec.provider.kind, spec.provider.model, urls, spec, spec.provider.api_key_env)


def replicas(
    kind: str, model: str | None, urls: tuple[str, ...], spec: RunSpec, api_key_env: str | None
) -> ReplicasProvider:
    """`model` at each of `urls` (OpenAI-compatible), each with --concurrency as its own cap."""
    from ttc.adapters import Connection
    from ttc.adapters.providers import Streaming, openai_replicas, require_env_name
    from ttc.engine.cli._provider_flags import key_named

    if kind != "openai":
        raise ConfigError(
            f"--base-url: given {len(urls)} times (replicas of one model), which only "
            f"--provider openai (an OpenAI-compatible server such as vLLM) takes, not {kind}"
        )
    if spec.batch:
        raise ConfigError("--base-url: given more than once, which --batch does not take")
    if not model:
        raise ConfigError(f"--model: required with --provider {kind}")
    require_env_name(api_key_env, "--api-key-env")
    how = spec.provider.streaming
    if how.api != "chat":
        raise ConfigError(f"--api {how.api}: not with --base-url given more than once (replicas)")
    stream = Streaming(how.first_byte_s, how.stall_s) if how.stream else None
    cap = spec.provider.max_response_bytes

    def connection() -> Connection:
        if cap is None:
            return Connection(stream=stream)
        return Connection(max_response_bytes=cap, stream=stream)

    tier = {"extra_body": {"service_tier": spec.provider.service_tier}}
    with key_named(f"--provider {kind}"):
        return openai_replicas(
            model,
            urls,
            connection=connection,
            max_concurrency=spec.concurrency,
            timeout_s=spec.timeout_s * REPLICA_DEADLINE,
            api_key_env=api_key_env or "OPENAI_API_KEY",
            **(tier if spec.provider.service_tier else {}),
        )
