"""What talks to the world: LLM providers, embedders, task suites, the sandbox and the simulator.

Each kind has its own package (`providers`, `embedders`, `suites`, `sandbox`, `sim`); their public
names are re-exported here. Adapters import only the public names of `ttc.engine`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttc._lazy import lazy_names

if TYPE_CHECKING:
    from ttc.adapters.embedders import EmbedOptions as EmbedOptions
    from ttc.adapters.embedders import GeminiEmbedder as GeminiEmbedder
    from ttc.adapters.embedders import LexicalEmbedder as LexicalEmbedder
    from ttc.adapters.embedders import MiniLMEmbedder as MiniLMEmbedder
    from ttc.adapters.embedders import OpenAIEmbedder as OpenAIEmbedder
    from ttc.adapters.embedders import make_embedder as make_embedder
    from ttc.adapters.embedders import minilm_available as minilm_available
    from ttc.adapters.providers import Connection as Connection
    from ttc.adapters.providers import GeminiProvider as GeminiProvider
    from ttc.adapters.providers import OpenAIProvider as OpenAIProvider
    from ttc.adapters.sim import SimConfig as SimConfig
    from ttc.adapters.sim import SimProvider as SimProvider
    from ttc.adapters.suites import SUITES as SUITES
    from ttc.adapters.suites import GenericConfig as GenericConfig
    from ttc.adapters.suites import GenericSuite as GenericSuite
    from ttc.adapters.suites import GPQASuite as GPQASuite
    from ttc.adapters.suites import LiveCodeBenchSuite as LiveCodeBenchSuite
    from ttc.adapters.suites import MathSuite as MathSuite
    from ttc.adapters.suites import ReasoningGymSuite as ReasoningGymSuite
    from ttc.adapters.suites import SuiteOptions as SuiteOptions
    from ttc.adapters.suites import extract_last_boxed as extract_last_boxed
    from ttc.adapters.suites import make_suite as make_suite

# Each public name, and the module it is loaded from on first use (`_lazy`).
_HOMES: dict[str, str] = {
    "Connection": "ttc.adapters.providers",
    "EmbedOptions": "ttc.adapters.embedders",
    "extract_last_boxed": "ttc.adapters.suites",
    "GeminiEmbedder": "ttc.adapters.embedders",
    "GeminiProvider": "ttc.adapters.providers",
    "GenericConfig": "ttc.adapters.suites",
    "GenericSuite": "ttc.adapters.suites",
    "GPQASuite": "ttc.adapters.suites",
    "LexicalEmbedder": "ttc.adapters.embedders",
    "LiveCodeBenchSuite": "ttc.adapters.suites",
    "make_embedder": "ttc.adapters.embedders",
    "make_suite": "ttc.adapters.suites",
    "MathSuite": "ttc.adapters.suites",
    "minilm_available": "ttc.adapters.embedders",
    "MiniLMEmbedder": "ttc.adapters.embedders",
    "OpenAIEmbedder": "ttc.adapters.embedders",
    "OpenAIProvider": "ttc.adapters.providers",
    "ReasoningGymSuite": "ttc.adapters.suites",
    "SimConfig": "ttc.adapters.sim",
    "SimProvider": "ttc.adapters.sim",
    "SuiteOptions": "ttc.adapters.suites",
    "SUITES": "ttc.adapters.suites",
}

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

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
