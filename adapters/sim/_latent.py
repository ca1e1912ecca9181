"""The simulator's hidden truth about a test set: which questions help which, and how hard and
how long each one is.

Which demonstrations help a question is the simulator's own latent notion, separate from every
embedder (the engine's lexical one included): each question belongs to one hidden skill cluster,
read from the data's own structure, and only a correct demonstration from the same cluster
earns the in-context gain. An embedder earns it only insofar as its neighbours share the
question's cluster; word overlap earns nothing by itself.

- **Cluster.** The first of `STRUCTURE_FIELDS` an item's `meta` carries: Reasoning Gym's task,
  MATH-500's subject, MinervaMath's course (`type`), GPQA's subdomain, LiveCodeBench's platform;
  prefixed by the item's `source` in a mixed suite. An item with none of them (a custom suite)
  gets a seeded cluster: a hash of (seed, id) into about one cluster per `fallback_cluster_size`
  questions, which no embedder can find.
- **Difficulty.** d = mean + std (sqrt(s) z_cluster + sqrt(1 - s) z_question), s the
  `cluster_difficulty_share`: some skills are harder than others, so the questions left unsolved
  crowd into the hard clusters, where solved demonstrations are scarce.
- **Length.** A question's responses have a typical length that grows with its difficulty and
  has its own lognormal factor; a failed response is `failure_length_ratio` times longer than a
  solved one (long unsuccessful reasoning: the paper's token-efficiency argument, Appendix C).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any, Protocol

from ttc.adapters.sim._prose import stable_hash
from ttc.engine import Item

__all__ = ["STRUCTURE_FIELDS", "LatentKnobs", "Latents", "structure_of"]

# An item's hidden cluster is the first of these fields its meta carries (see the module doc).
STRUCTURE_FIELDS = ("task", "subject", "type", "subdomain", "domain", "platform")
_STD_NORMAL = NormalDist()


class LatentKnobs(Protocol):
    """The knobs of `SimConfig` the latents read."""

    @property
    def seed(self) -> int: ...
    @property
    def difficulty_mean(self) -> float: ...
    @property
    def difficulty_std(self) -> float: ...
    @property
    def cluster_difficulty_share(self) -> float: ...
    @property
    def fallback_cluster_size(self) -> float: ...
    @property
    def mean_output_tokens(self) -> float: ...
    @property
    def length_difficulty(self) -> float: ...
    @property
    def question_length_sigma(self) -> float: ...
    @property
    def output_tokens_sigma(self) -> float: ...
    @property
    def failure_length_ratio(self) -> float: ...


def structure_of(meta: Mapping[str, Any]) -> str | None:
    """The skill an item's own data names (see `STRUCTURE_FIELDS`), or None."""
    source = meta.get("source")
    prefix = f"{source}/" if isinstance(source, str) and source else ""
    for name in STRUCTURE_FIELDS:
        value = meta.get(name)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return f"{prefix}{name}={value}"
    return f"{prefix}*" if prefix else None


def _normal(seed: int, *key: object) -> float:
    """A standard normal draw from a hash: the same in every process, whatever the order."""
    u = (stable_hash(seed, *key) + 0.5) / 2.0**64
    return _STD_NORMAL.inv_cdf(u)


class Latents:
    """Every question's hidden cluster, difficulty and typical length, drawn once per seed."""

    def __init__(self, items: Sequence[Item], knobs: LatentKnobs) -> None:
        self.knobs = knobs
        structured = {item.id: structure_of(item.meta) for item in items}
        unstructured = sum(key is None for key in structured.values())
        self._fallback = max(1, round(unstructured / knobs.fallback_cluster_size))
        self._clusters = {
            item_id: key if key is not None else self._seeded(item_id)
            for item_id, key in structured.items()
        }
        self._difficulty: dict[str, float] = {}

    def _seeded(self, item_id: str) -> str:
        return f"seeded-{stable_hash(self.knobs.seed, 'cluster', item_id) % self._fallback}"

    def cluster(self, item_id: str) -> str:
        """The question's hidden skill cluster."""
        return self._clusters[item_id]

    def clusters(self) -> dict[str, str]:
        """Every question's hidden cluster, by id."""
        return dict(self._clusters)

    def difficulty(self, item_id: str) -> float:
        """The latent difficulty: the cluster's share and the question's own, from the seed."""
        d = self._difficulty.get(item_id)
        if d is None:
            k = self.knobs
            share = k.cluster_difficulty_share
            z = math.sqrt(1.0 - share) * _normal(k.seed, "difficulty", item_id)
            if share > 0:
                z += math.sqrt(share) * _normal(k.seed, "cluster", self.cluster(item_id))
            d = self._difficulty[item_id] = k.difficulty_mean + k.difficulty_std * z
        return d

    def length_mu(self, item_id: str, success: bool) -> float:
        """The log-scale location of one response's output tokens: the question's typical length
        (longer when harder, with its own factor), longer again when the response fails."""
        k = self.knobs
        z = (
            (self.difficulty(item_id) - k.difficulty_mean) / k.difficulty_std
            if k.difficulty_std
            else 0.0
        )
        mu = math.log(k.mean_output_tokens) - k.output_tokens_sigma**2 / 2
        mu += k.length_difficulty * z + k.question_length_sigma * _normal(k.seed, "length", item_id)
        return mu if success else mu + math.log(k.failure_length_ratio)
