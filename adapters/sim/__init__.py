"""The offline simulator, its answers per suite, and `ttc serve`: the sim model behind the OpenAI
and Gemini APIs."""

from ttc.adapters.sim._answers import SimAnswers, answers_for
from ttc.adapters.sim._serve import (
    ServeOptions,
    SimServer,
    add_serve_arguments,
    options_from_args,
    running_server,
    serve_forever,
)
from ttc.adapters.sim._sim import (
    SimConfig,
    SimDifficulty,
    SimJudge,
    SimProvider,
    SimRoleConfig,
)

__all__ = [
    "ServeOptions",
    "SimAnswers",
    "SimConfig",
    "SimDifficulty",
    "SimJudge",
    "SimProvider",
    "SimRoleConfig",
    "SimServer",
    "add_serve_arguments",
    "answers_for",
    "options_from_args",
    "running_server",
    "serve_forever",
]
