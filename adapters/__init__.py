"""What talks to the world: LLM providers, embedders and task suites."""

from ttc.adapters._embedders import make_embedder
from ttc.adapters._gemini import GeminiProvider
from ttc.adapters._generic import GenericConfig, GenericSuite
from ttc.adapters._gpqa import GPQASuite
from ttc.adapters._lexical import LexicalEmbedder
from ttc.adapters._livecodebench import LiveCodeBenchSuite
from ttc.adapters._minilm import MiniLMEmbedder, minilm_available
from ttc.adapters._openai import OpenAIProvider
from ttc.adapters._reasoning_gym import ReasoningGymSuite, extract_last_boxed
from ttc.adapters._remote_embed import GeminiEmbedder, OpenAIEmbedder
from ttc.adapters._sim import SimConfig, SimProvider
from ttc.adapters._suites import SUITES, SuiteOptions, make_suite

__all__ = [
    "SUITES",
    "GPQASuite",
    "GeminiEmbedder",
    "GeminiProvider",
    "GenericConfig",
    "GenericSuite",
    "LexicalEmbedder",
    "LiveCodeBenchSuite",
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
