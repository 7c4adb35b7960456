"""The configuration reference page is generated from the models and committed as generated."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field

from app.config_reference import DOC_PATH, main, render
from schemas.common import ContractModel
from schemas.config import GatewaySettings, RouteLensConfig


def test_committed_page_is_the_generated_one() -> None:
    assert DOC_PATH.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md differs from the configuration models: run python -m app.config_reference"
    )


class _Canary(ContractModel):
    """A canary section."""

    level: Literal["low", "high"] | None = Field(None, description="How loud it sings.")


class _ExtendedGateway(GatewaySettings):
    canary_timeout_s: float = Field(7.5, gt=0, description="A field added in the test only.")


class _ExtendedConfig(RouteLensConfig):
    gateway: _ExtendedGateway = _ExtendedGateway()
    canaries: dict[str, list[_Canary]] = Field(default={}, description="Canaries by cage.")


def test_a_new_field_appears_where_it_belongs() -> None:
    page = render(_ExtendedConfig)
    gateway = page.split("## `gateway`", 1)[1].split("\n## ", 1)[0]
    assert "| `canary_timeout_s` | number | `7.5` | A field added in the test only. *(> 0)* |" in gateway
    assert "| `canaries` | map of string to list of [_Canary](#canaries) | `{}` | Canaries by cage. |" in page
    assert "## `canaries`" in page
    assert '| `level` | `"low"`, `"high"` or null | `null` | How loud it sings. |' in page
    assert "canary_timeout_s" not in render()


def test_render_is_deterministic_and_each_model_is_rendered_once() -> None:
    page = render()
    assert page == render()
    # RouterSettings is the `router` section and is linked, not repeated, from the arms' inline policies.
    assert page.count("| `analyse_max_chars` |") == 1
    assert "| `router` | [RouterSettings](#router) or null | `null` |" in page
    assert "### `fleet.instances[]`" in page


def test_every_link_in_the_page_has_its_heading() -> None:
    import re

    page = render()
    headings = {re.sub(r"[^a-z0-9_-]", "", h.lower()) for h in re.findall(r"^#+ `(.+)`$", page, re.M)}
    links = set(re.findall(r"\]\(#([^)]+)\)", page))
    assert links and links <= headings


def test_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "configuration.md"
    assert main(["--check", "--output", str(page)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert main(["--output", str(page)]) == 0
    assert main(["--check", "--output", str(page)]) == 0
    page.write_text(page.read_text(encoding="utf-8") + "edited by hand\n", encoding="utf-8")
    assert main(["--check", "--output", str(page)]) == 1


class _Bell(ContractModel):
    """A bell."""

    volume: int = Field(3, description="How loud.")


class _Belfry(ContractModel):
    """Two bells of one kind, each held with a default of its own."""

    big: _Bell = _Bell(volume=10)
    small: _Bell = _Bell(volume=1)


class _BelfryConfig(RouteLensConfig):
    belfry: _Belfry = _Belfry()


def test_a_model_held_with_other_defaults_shows_them_where_its_table_is() -> None:
    # resilience.breakers.model is a RateBreakerSettings(close_after=10): its table said the class's 3.
    page = render(_BelfryConfig)
    big = page.split("### `belfry.big`", 1)[1].split("\n#", 1)[0]
    assert "| `volume` | integer | `10` | How loud. |" in big
    belfry = page.split("## `belfry`", 1)[1].split("\n#", 1)[0]
    assert '| `small` | [_Bell](#belfrybig) | `{"volume": 1}` |' in belfry  # the other holder says its own
