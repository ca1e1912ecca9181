"""What an adapter author implements and what flows through the engine: the values (Item,
Request, Completion, Usage, Verdict...), the Provider / Suite / Embedder / BatchAPI contracts,
the error tree, the run's config, the run state strategies read, and a strategy's parts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttc._lazy import lazy_names

if TYPE_CHECKING:
    from ttc.engine.contract._batch import BatchAPI as BatchAPI
    from ttc.engine.contract._batch import BatchResult as BatchResult
    from ttc.engine.contract._batch import BatchStatus as BatchStatus
    from ttc.engine.contract._config import INDEXES as INDEXES
    from ttc.engine.contract._config import JUDGES as JUDGES
    from ttc.engine.contract._config import METHODS as METHODS
    from ttc.engine.contract._config import NEIGHBOUR_MODES as NEIGHBOUR_MODES
    from ttc.engine.contract._config import OPERATIONAL as OPERATIONAL
    from ttc.engine.contract._config import PRESETS as PRESETS
    from ttc.engine.contract._config import RunConfig as RunConfig
    from ttc.engine.contract._errors import BadRequest as BadRequest
    from ttc.engine.contract._errors import ConfigError as ConfigError
    from ttc.engine.contract._errors import DataError as DataError
    from ttc.engine.contract._errors import Fatal as Fatal
    from ttc.engine.contract._errors import ProviderError as ProviderError
    from ttc.engine.contract._errors import RateLimited as RateLimited
    from ttc.engine.contract._errors import ResponseTooLarge as ResponseTooLarge
    from ttc.engine.contract._errors import Stalled as Stalled
    from ttc.engine.contract._errors import Transient as Transient
    from ttc.engine.contract._errors import TtcError as TtcError
    from ttc.engine.contract._errors import VerifierError as VerifierError
    from ttc.engine.contract._errors import WriteError as WriteError
    from ttc.engine.contract._policy import Allocation as Allocation
    from ttc.engine.contract._policy import Allotment as Allotment
    from ttc.engine.contract._policy import DemoPlan as DemoPlan
    from ttc.engine.contract._policy import DemoRef as DemoRef
    from ttc.engine.contract._policy import Intervention as Intervention
    from ttc.engine.contract._policy import Neighbourhood as Neighbourhood
    from ttc.engine.contract._policy import SolvedView as SolvedView
    from ttc.engine.contract._state import QuestionRecord as QuestionRecord
    from ttc.engine.contract._state import RoundStats as RoundStats
    from ttc.engine.contract._state import RunState as RunState
    from ttc.engine.contract._state import sample_seed as sample_seed
    from ttc.engine.contract._types import Completion as Completion
    from ttc.engine.contract._types import Demo as Demo
    from ttc.engine.contract._types import Embedder as Embedder
    from ttc.engine.contract._types import EmbedderSpec as EmbedderSpec
    from ttc.engine.contract._types import FloatArray as FloatArray
    from ttc.engine.contract._types import Item as Item
    from ttc.engine.contract._types import Message as Message
    from ttc.engine.contract._types import Provider as Provider
    from ttc.engine.contract._types import RateInfo as RateInfo
    from ttc.engine.contract._types import Request as Request
    from ttc.engine.contract._types import Sampling as Sampling
    from ttc.engine.contract._types import Suite as Suite
    from ttc.engine.contract._types import Usage as Usage
    from ttc.engine.contract._types import Verdict as Verdict

# Each public name, and the module it is loaded from on first use (`_lazy`).
_HOMES: dict[str, str] = {
    "Allocation": "ttc.engine.contract._policy",
    "Allotment": "ttc.engine.contract._policy",
    "BadRequest": "ttc.engine.contract._errors",
    "BatchAPI": "ttc.engine.contract._batch",
    "BatchResult": "ttc.engine.contract._batch",
    "BatchStatus": "ttc.engine.contract._batch",
    "Completion": "ttc.engine.contract._types",
    "ConfigError": "ttc.engine.contract._errors",
    "DataError": "ttc.engine.contract._errors",
    "Demo": "ttc.engine.contract._types",
    "DemoPlan": "ttc.engine.contract._policy",
    "DemoRef": "ttc.engine.contract._policy",
    "Embedder": "ttc.engine.contract._types",
    "EmbedderSpec": "ttc.engine.contract._types",
    "Fatal": "ttc.engine.contract._errors",
    "FloatArray": "ttc.engine.contract._types",
    "INDEXES": "ttc.engine.contract._config",
    "Intervention": "ttc.engine.contract._policy",
    "Item": "ttc.engine.contract._types",
    "JUDGES": "ttc.engine.contract._config",
    "Message": "ttc.engine.contract._types",
    "METHODS": "ttc.engine.contract._config",
    "NEIGHBOUR_MODES": "ttc.engine.contract._config",
    "Neighbourhood": "ttc.engine.contract._policy",
    "OPERATIONAL": "ttc.engine.contract._config",
    "PRESETS": "ttc.engine.contract._config",
    "Provider": "ttc.engine.contract._types",
    "ProviderError": "ttc.engine.contract._errors",
    "QuestionRecord": "ttc.engine.contract._state",
    "RateInfo": "ttc.engine.contract._types",
    "RateLimited": "ttc.engine.contract._errors",
    "Request": "ttc.engine.contract._types",
    "ResponseTooLarge": "ttc.engine.contract._errors",
    "RoundStats": "ttc.engine.contract._state",
    "RunConfig": "ttc.engine.contract._config",
    "RunState": "ttc.engine.contract._state",
    "sample_seed": "ttc.engine.contract._state",
    "Sampling": "ttc.engine.contract._types",
    "SolvedView": "ttc.engine.contract._policy",
    "Suite": "ttc.engine.contract._types",
    "Stalled": "ttc.engine.contract._errors",
    "Transient": "ttc.engine.contract._errors",
    "TtcError": "ttc.engine.contract._errors",
    "Usage": "ttc.engine.contract._types",
    "Verdict": "ttc.engine.contract._types",
    "VerifierError": "ttc.engine.contract._errors",
    "WriteError": "ttc.engine.contract._errors",
}

__all__ = [
    "INDEXES",
    "JUDGES",
    "METHODS",
    "NEIGHBOUR_MODES",
    "OPERATIONAL",
    "PRESETS",
    "Allocation",
    "Allotment",
    "BadRequest",
    "BatchAPI",
    "BatchResult",
    "BatchStatus",
    "Completion",
    "ConfigError",
    "DataError",
    "Demo",
    "DemoPlan",
    "DemoRef",
    "Embedder",
    "EmbedderSpec",
    "Fatal",
    "FloatArray",
    "Intervention",
    "Item",
    "Message",
    "Neighbourhood",
    "Provider",
    "ProviderError",
    "QuestionRecord",
    "RateInfo",
    "RateLimited",
    "Request",
    "ResponseTooLarge",
    "RoundStats",
    "RunConfig",
    "RunState",
    "Sampling",
    "SolvedView",
    "Stalled",
    "Suite",
    "Transient",
    "TtcError",
    "Usage",
    "Verdict",
    "VerifierError",
    "WriteError",
    "sample_seed",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
