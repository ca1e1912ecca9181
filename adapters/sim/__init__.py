"""The offline simulator, its answers per suite, and `ttc serve`: the sim model behind the OpenAI
and Gemini APIs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttc._lazy import lazy_names

if TYPE_CHECKING:
    from ttc.adapters.sim._answers import SimAnswers as SimAnswers
    from ttc.adapters.sim._answers import answers_for as answers_for
    from ttc.adapters.sim._serve import ServeOptions as ServeOptions
    from ttc.adapters.sim._serve import SimServer as SimServer
    from ttc.adapters.sim._serve import add_serve_arguments as add_serve_arguments
    from ttc.adapters.sim._serve import options_from_args as options_from_args
    from ttc.adapters.sim._serve import running_server as running_server
    from ttc.adapters.sim._serve import serve_forever as serve_forever
    from ttc.adapters.sim._sim import SimConfig as SimConfig
    from ttc.adapters.sim._sim import SimDifficulty as SimDifficulty
    from ttc.adapters.sim._sim import SimJudge as SimJudge
    from ttc.adapters.sim._sim import SimProvider as SimProvider
    from ttc.adapters.sim._sim import SimRoleConfig as SimRoleConfig

# Each public name, and the module it is loaded from on first use (`_lazy`).
_HOMES: dict[str, str] = {
    "add_serve_arguments": "ttc.adapters.sim._serve",
    "answers_for": "ttc.adapters.sim._answers",
    "options_from_args": "ttc.adapters.sim._serve",
    "running_server": "ttc.adapters.sim._serve",
    "serve_forever": "ttc.adapters.sim._serve",
    "ServeOptions": "ttc.adapters.sim._serve",
    "SimAnswers": "ttc.adapters.sim._answers",
    "SimConfig": "ttc.adapters.sim._sim",
    "SimDifficulty": "ttc.adapters.sim._sim",
    "SimJudge": "ttc.adapters.sim._sim",
    "SimProvider": "ttc.adapters.sim._sim",
    "SimRoleConfig": "ttc.adapters.sim._sim",
    "SimServer": "ttc.adapters.sim._serve",
}

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

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
