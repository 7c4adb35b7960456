"""The encoder with sentence-transformers' mean pooling and normalisation, as one traceable module.

Imported only when the model loads (it imports torch).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["MeanPooled"]


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
