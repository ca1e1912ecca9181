"""One request's way out: the sender, its retry policy, the limiter and its pace, straggler
copies, the response cache, token estimates and prices."""

from ttc.engine.send._cache import CachingProvider, ProviderCache, ResponseCache
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._prices import Price
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.send._tokens import MAX_RESPONSE_TOKENS, TokenEstimator, text_tokens, token_count

__all__ = [
    "MAX_RESPONSE_TOKENS",
    "CachingProvider",
    "Limiter",
    "Price",
    "ProviderCache",
    "ResponseCache",
    "RetryPolicy",
    "TokenEstimator",
    "text_tokens",
    "token_count",
]
