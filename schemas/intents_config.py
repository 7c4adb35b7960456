"""The ``routing.intents`` section: semantic intents from labelled example utterances."""

from __future__ import annotations

from pydantic import Field

from schemas.common import ContractModel

__all__ = ["IntentSettings"]


class IntentSettings(ContractModel):
    """Where the routes' examples are and how classification abstains."""

    routes: str = Field(description="YAML file: route name -> example utterances; relative to the config file.")
    max_tokens: int = Field(512, gt=0, description="Input is cut here before classification (seed: 512).")
