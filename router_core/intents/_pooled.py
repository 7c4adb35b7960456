"""The encoder with sentence-transformers' mean pooling and normalisation, as one traceable module.

Imported only when the model loads (it imports torch).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["EarlyHead", "MeanPooled", "RestOfLayers"]


class MeanPooled(torch.nn.Module):
    """Token states averaged over the attention mask, then L2-normalised (``Pooling`` + ``Normalize``)."""

    def __init__(self, encoder: Any) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Return one unit-length row per input row."""
        tokens = self.encoder(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]
        mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
        mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, p=2.0, dim=1)


class EarlyHead(torch.nn.Module):
    """The encoder cut after its first layers: the pooled row at that depth, and the token states to go on from."""

    def __init__(self, encoder: Any) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the unit-length pooled rows and the token states."""
        tokens = self.encoder(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]
        mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
        mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, p=2.0, dim=1), tokens


class RestOfLayers(torch.nn.Module):
    """The encoder's remaining layers over one text's token states (a batch of one: no padding, so no mask)."""

    def __init__(self, layers: torch.nn.ModuleList) -> None:
        super().__init__()
        self.layers = layers

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Return the unit-length pooled row after the last layer."""
        for layer in self.layers:
            out = layer(tokens)
            tokens = out[0] if isinstance(out, tuple) else out  # a tuple in transformers 4, a tensor in 5
        return torch.nn.functional.normalize(tokens.mean(1), p=2.0, dim=1)
