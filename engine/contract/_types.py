"""Values that flow through the engine, and the small interfaces of its boundaries.

A `Provider` turns a `Request` into a `Completion`; a `Suite` loads `Item`s, renders prompts and
judges responses with a `Verdict`; an `Embedder` turns texts into vectors. Everything here is a
frozen value or a small interface: the engine holds no vendor types. `Provider` and `Suite` are
base classes that declare their optional capabilities with defaults, so the engine reads them as
attributes and never probes for them; `Embedder` stays a structural protocol, because the engine
tells an embedder from a factory of one by its shape.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._fastinit import fast_init

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ttc.engine.contract._batch import BatchAPI

    FloatArray: TypeAlias = npt.NDArray[np.float32]


def __getattr__(name: str) -> Any:
    # FloatArray at run time, numpy loaded only when it is asked for: a command that embeds
    # nothing (`ttc batch`) does not pay a tenth of a second to import it.
    if name != "FloatArray":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import numpy as np
    import numpy.typing as npt

    alias = npt.NDArray[np.float32]
    globals()["FloatArray"] = alias
    return alias


@dataclass(frozen=True, slots=True)
class Item:
    """One test question: its id, text, reference answer and suite-specific payload."""

    id: str
    question: str
    reference: str
    # Opaque to the engine; the suite's verifier reads it (e.g. reasoning-gym's entry metadata).
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Demo:
    """A solved neighbour shown as an in-context demonstration: its question and ỹ."""

    item_id: str
    question: str
    response: str
    similarity: float | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class Sampling:
    """Decoding parameters; None means the provider's default."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    max_output_tokens: int | None = None
    thinking_budget: int | None = None
    reasoning_effort: str | None = None
    # OpenAI reasoning models: "low" | "medium" | "high".
    verbosity: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: str
    content: str


@fast_init
@dataclass(frozen=True, slots=True)
class Request:
    """What the engine asks a provider for.

    `item_id` and `demos` say what the prompt was rendered from; real providers send only the
    messages, the offline simulator reads them to decide how likely it is to succeed.
    """

    messages: tuple[Message, ...]
    sampling: Sampling = Sampling()
    n: int = 1
    item_id: str = ""
    demos: tuple[Demo, ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens billed for one request, split as the paper reports them."""

    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    # Of `input_tokens`, those the provider served from its prompt cache (the cached rate).
    cached_tokens: int = 0
    # Of all these tokens, those bought through a Batch API (the batch rate); None: none.
    batch: Usage | None = None

    def __add__(self, other: Usage) -> Usage:
        batch = self.batch if other.batch is None else other.batch
        if self.batch is not None and other.batch is not None:
            batch = self.batch + other.batch
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.thinking_tokens + other.thinking_tokens,
            self.cached_tokens + other.cached_tokens,
            batch,
        )

    def bought_in_batch(self) -> Usage:
        """This usage, every token of it bought through a Batch API."""
        plain = Usage(
            self.input_tokens, self.output_tokens, self.thinking_tokens, self.cached_tokens
        )
        return Usage(
            plain.input_tokens,
            plain.output_tokens,
            plain.thinking_tokens,
            plain.cached_tokens,
            plain,
        )


@dataclass(frozen=True, slots=True)
class RateInfo:
    """What a provider's response said about its rate limits; None where it said nothing.

    OpenAI sends `x-ratelimit-limit-requests`, `x-ratelimit-remaining-tokens`,
    `x-ratelimit-reset-requests` ("1s", "6m0s", "20ms") and so on; the adapter parses them into
    numbers (resets in seconds) so the limiter can start from the server's limits and respect its
    resets without knowing any vendor's header names.
    """

    limit_requests: int | None = None
    limit_tokens: int | None = None
    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_requests_s: float | None = None
    reset_tokens_s: float | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class Completion:
    """A provider's answer: one text per requested sample, and the usage of the whole call."""

    texts: tuple[str, ...]
    usage: Usage
    finish_reasons: tuple[str, ...] = ()
    latency_s: float = 0.0
    model: str = ""
    # The rate-limit headers of the response, when the provider sends them.
    rate: RateInfo | None = None
    # Answered by the offline simulator: set by the Sender from the provider's `simulated`,
    # and kept with the answer in the response cache and the journal.
    simulated: bool = False


@fast_init
@dataclass(frozen=True, slots=True)
class Verdict:
    """A verifier's judgement of one response: a score in [0, 1] and the answer it extracted."""

    score: float
    answer: str | None = None
    detail: str = ""


class Provider(abc.ABC):
    """An LLM endpoint: one abstract async method, `generate`; it never retries.

    A failed attempt raises from the error tree (`ttc.engine.contract._errors`), translated in one
    place per adapter; the engine owns backoff, limits and timeouts. Optional capabilities are
    declared here with their defaults, and a provider that has one overrides it:

    - `endpoint`: where requests go (a base URL), None for in-process providers. It is part of
      the response cache's key and of a run's config: a rehearsal server and the vendor answer
      the same model name differently.
    - `simulated`: True once answers are known to come from the offline simulator (in process,
      or through `ttc serve`), so that reports say the numbers measure the machinery only.

    - `batch`: a provider that sends each round through its vendor's Batch API (`--batch`)
      sets it (`ttc.engine.BatchAPI`: upload, create, poll, read typed batch records); the
      engine sends through `generate` for every provider that leaves it None.

    Whoever builds a provider closes it with `aclose`; the engine never does.
    """

    name: str
    model: str
    endpoint: str | None = None
    simulated: bool = False
    batch: BatchAPI | None = None

    @abc.abstractmethod
    async def generate(self, request: Request) -> Completion:
        """One call: `request.n` texts and their usage, or an error from the tree."""

    async def aclose(self) -> None:
        """Releases what the provider holds (sessions, clients); by default nothing."""
        return None


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension, `batch_size` at once."""

    @property
    def name(self) -> str: ...
    @property
    def dim(self) -> int: ...
    @property
    def batch_size(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> FloatArray: ...


# What a host may give a run as its embedder: one, a factory called only when the method needs
# vectors (in a worker thread, so that loading a model never holds the host's loop), or None
# (the lexical default).
EmbedderSpec: TypeAlias = Embedder | Callable[[], Embedder] | None


def normal_answer(answer: str) -> str:
    """An extracted answer with its whitespace normalised: the default `Suite.answer_key`."""
    return " ".join(answer.split())


class Suite(abc.ABC):
    """A benchmark: its items, the paper's two prompt templates, and a verifier.

    `judge` runs in worker processes, so a suite must be picklable and `judge` pure. The hooks
    with defaults are optional: override them where the suite needs them. What the offline
    simulator needs of a suite (answers in its format) is the simulator's own optional protocol,
    not part of this contract.
    """

    name: str
    # What summary.json must say of how this suite judged, where the verdicts are less than
    # they seem (e.g. the programs could read the tests); None: nothing to say.
    judging: Mapping[str, Any] | None = None

    @abc.abstractmethod
    def items(self) -> list[Item]:
        """The test set, in a stable order."""

    @abc.abstractmethod
    def warmup_prompt(self, item: Item) -> str:
        """The zero-shot prompt of the warm-up round."""

    @abc.abstractmethod
    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        """The prompt showing solved neighbours as demonstrations."""

    @abc.abstractmethod
    def judge(self, item: Item, response: str) -> Verdict:
        """The verdict on one response: pure, run in verifier processes."""

    def prepare(self) -> None:
        """Builds the verifiers once in each verifier process, at its start; by default nothing."""
        return None

    def answer_key(self, answer: str) -> str:
        """Which extracted answers self-consistency counts as one (the math suites canonicalise
        LaTeX and numbers); by default, answers equal up to whitespace."""
        return normal_answer(answer)


def require_parts(provider: object, suite: object, roles: Mapping[str, object]) -> None:
    """Refuses, with the base class to subclass, a provider or suite written to the old duck-typed
    contract: the engine reads their declared capabilities (`endpoint`, `simulated`,
    `answer_key`, `prepare`) as attributes, with the bases' defaults."""
    for what, part, base in (
        ("provider", provider, Provider),
        ("suite", suite, Suite),
        *((f"the {role} model", p, Provider) for role, p in roles.items()),
    ):
        if not isinstance(part, base):
            raise ConfigError(
                f"{what} {type(part).__name__}: subclass ttc.engine.{base.__name__} (its optional "
                "capabilities have defaults there)"
            )
