"""The ``routing.attachments`` section: how attachments are typed, bounded and matched to models."""

from __future__ import annotations

from pydantic import Field

from schemas.common import ContractModel

__all__ = ["AttachmentSettings"]


class AttachmentSettings(ContractModel):
    """Limits on attachments and which detected types each model accepts."""

    max_bytes: int = Field(20 * 1024 * 1024, gt=0, description="Largest decoded attachment; larger is a 400.")
    accept: dict[str, list[str]] = Field(
        default={},
        description="Model -> detected types it accepts (pdf, docx, png, ...); a model left out accepts every type.")
