"""``storage.elasticsearch`` refused at startup with the usual config error, never a traceback or a later failure.

A URL the client cannot use is refused when the file loads (file, line, field; exit 2); an
``api_key_env`` naming an unset or empty variable when the store opens (naming the variable and
the setting), rather than connecting without the key.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.cli import main
from app.run.procs import free_port
from ingest.elasticsearch.store import ElasticsearchStore
from schemas.config.storage import ElasticsearchSettings
from schemas.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
FLEET = "fleet:\n  instances:\n    - {id: a, model: m, url: 'http://127.0.0.1:9000'}\n"
BAD_URLS = ["not a url", "ftp://127.0.0.1:9200", "127.0.0.1:9200", "http://", "http:// es:9200", "http://es :9200"]
GOOD_URLS = ["http://127.0.0.1:9200", "https://es.internal", "https://user:pw@es:9243/prefix", "http://[::1]:9200"]


def es_config(tmp_path: Path, elasticsearch: str) -> Path:
    path = tmp_path / "routelens.yaml"
    path.write_text(f"{FLEET}storage:\n  backend: elasticsearch\n  elasticsearch: {elasticsearch}\n")
    return path


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_url_the_client_cannot_use_is_refused_by_the_model(url: str) -> None:
    with pytest.raises(ValidationError, match="url"):
        ElasticsearchSettings(url=url)


@pytest.mark.parametrize("url", GOOD_URLS)
def test_http_and_https_urls_are_accepted_and_open(url: str) -> None:
    ElasticsearchStore.from_settings(ElasticsearchSettings(url=url)).close()


def test_a_bad_url_names_file_line_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = es_config(tmp_path, "{url: 'not a url'}")
    assert main(["--config", str(path), "store", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err.replace("\n", "")
    assert f"{path}:6: storage.elasticsearch.url" in err and "Traceback" not in err


def test_what_the_pattern_lets_through_is_still_a_config_error() -> None:
    with pytest.raises(ConfigError, match="storage.elasticsearch.url"):
        ElasticsearchStore.from_settings(ElasticsearchSettings(url="http://es:99999"))


@pytest.mark.parametrize("value", [None, "", "  "], ids=["unset", "empty", "blank"])
def test_an_api_key_variable_that_is_unset_or_empty_refuses_to_open(value: str | None) -> None:
    environ = {} if value is None else {"ES_KEY": value}
    with pytest.raises(ConfigError) as caught:
        ElasticsearchStore.from_settings(ElasticsearchSettings(api_key_env="ES_KEY"), environ)
    assert caught.value.problems == [(None, "storage.elasticsearch.api_key_env",
                                      "names the environment variable ES_KEY, which is unset or empty")]


def test_the_api_key_named_is_sent() -> None:
    store = ElasticsearchStore.from_settings(ElasticsearchSettings(api_key_env="ES_KEY"), {"ES_KEY": "k3y\n"})
    assert store.client._headers["authorization"] == "ApiKey k3y"
    store.close()


def test_the_store_process_does_not_start_without_its_api_key(tmp_path: Path) -> None:
    path = es_config(tmp_path, "{url: 'http://127.0.0.1:9', api_key_env: ROUTELENS_TEST_ES_KEY}")
    env = {k: v for k, v in os.environ.items() if k != "ROUTELENS_TEST_ES_KEY"}
    done = subprocess.run([sys.executable, "-m", "app", "--config", str(path), "store", "--port", str(free_port()),
                           "--db", str(tmp_path / "t.duckdb")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    err = done.stderr.replace("\n", "")
    assert done.returncode == 2 and "store ready" not in done.stdout, done.stdout + done.stderr
    assert "storage.elasticsearch.api_key_env: names the environment variable ROUTELENS_TEST_ES_KEY" in err
    assert "Traceback" not in err
