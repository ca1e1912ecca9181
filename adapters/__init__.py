"""What talks to the world: LLM providers, embedders and task suites."""

from ttc.adapters._embedders import make_embedder
from ttc.adapters._lexical import LexicalEmbedder
from ttc.adapters._minilm import MiniLMEmbedder, minilm_available
from ttc.adapters._reasoning_gym import ReasoningGymSuite, extract_last_boxed
from ttc.adapters._sim import SimConfig, SimProvider

__all__ = [
    "LexicalEmbedder",
    "MiniLMEmbedder",
    "ReasoningGymSuite",
    "SimConfig",
    "SimProvider",
    "extract_last_boxed",
    "make_embedder",
    "minilm_available",
]
