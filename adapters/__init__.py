"""What talks to the world: LLM providers, embedders, task suites, the sandbox and the simulator.

Each kind has its own package (`providers`, `embedders`, `suites`, `sandbox`, `sim`); their public
names are re-exported here. Adapters import only the public names of `ttc.engine`.
"""

from ttc.adapters.embedders import (
    EmbedOptions,
    GeminiEmbedder,
    LexicalEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    make_embedder,
    minilm_available,
)
from ttc.adapters.providers import Connection, GeminiProvider, OpenAIProvider
from ttc.adapters.sim import SimConfig, SimProvider
from ttc.adapters.suites import (
    SUITES,
    GenericConfig,
    GenericSuite,
    GPQASuite,
    LiveCodeBenchSuite,
    MathSuite,
    ReasoningGymSuite,
    SuiteOptions,
    extract_last_boxed,
    make_suite,
)

__all__ = [
    "SUITES",
    "Connection",
    "EmbedOptions",
    "GPQASuite",
    "GeminiEmbedder",
    "GeminiProvider",
    "GenericConfig",
    "GenericSuite",
    "LexicalEmbedder",
    "LiveCodeBenchSuite",
    "MathSuite",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "OpenAIProvider",
    "ReasoningGymSuite",
    "SimConfig",
    "SimProvider",
    "SuiteOptions",
    "extract_last_boxed",
    "make_embedder",
    "make_suite",
    "minilm_available",
]
