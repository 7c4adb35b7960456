"""Feedback on a decision: was the request routed where it should have gone?"""

from __future__ import annotations

from pydantic import Field, model_validator

from schemas.common import ContractModel, UtcTime

__all__ = ["Feedback"]


class Feedback(ContractModel):
    """A verdict on one routed request, from a client, a grader or the traffic generator."""

    request_id: str = Field(min_length=1, max_length=128)
    ts: UtcTime
    correct: bool = Field(description="Whether the answer (or the routing) was right.")
    expected_class: str | None = Field(None, max_length=64, description="The query's true class.")
    expected_model: str | None = Field(None, max_length=200, description="Where it should have gone.")
    source: str = Field("client", max_length=64)

    @model_validator(mode="after")
    def _naive_ts_is_an_error(self) -> Feedback:
        if self.ts.tzinfo is None:
            raise ValueError("ts must carry a time zone")
        return self
