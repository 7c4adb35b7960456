"""The ``storage:`` section of ``routelens.yaml``: where traces go and how they get there."""

from __future__ import annotations

from pydantic import Field

from schemas.common import ContractModel

__all__ = ["StorageSettings"]


class StorageSettings(ContractModel):
    """Where traces go."""

    duckdb_path: str = ".routelens/traces.duckdb"
    queue_size: int = Field(50_000, ge=1)
    batch_size: int = Field(1024, ge=1)
    flush_interval_ms: int = Field(100, ge=1)
