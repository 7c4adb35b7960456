"""The fleet: every configured instance served from one process."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import orjson
import pytest
from aiohttp import ClientSession

from schemas.config import RouteLensConfig
from schemas.yamlconf import parse_yaml_model
from sim.fleet import start_fleet
from sim.server import INSTANCE_KEY

REPO_ROOT = Path(__file__).resolve().parents[2]

FLEET_YAML = """\
fleet:
  instances:
    - {id: big-a, model: big-model, url: "http://127.0.0.1:0", context_window: 4096}
    - {id: small-a, model: small-model, url: "http://127.0.0.1:0", context_window: 1024}
sim:
  zero_delay: true
  seed: 4
  models:
    big-model: {max_concurrency: 3}
"""


def test_start_fleet_serves_each_instance_with_its_profile():
    async def scenario():
        handle = await start_fleet(parse_yaml_model(RouteLensConfig, FLEET_YAML))
        try:
            served = {}
            async with ClientSession() as http:
                for instance_id, url in handle.urls.items():
                    async with http.get(f"{url}/v1/models") as resp:
                        served[instance_id] = (await resp.json())["data"][0]["id"]
            limits = {i: app[INSTANCE_KEY].engine.profile.max_concurrency for i, app in handle.apps.items()}
            return served, limits
        finally:
            await handle.close()
            await handle.close()

    served, limits = asyncio.run(scenario())
    assert served == {"big-a": "big-model", "small-a": "small-model"}
    assert limits == {"big-a": 3, "small-a": 16}


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_run_fleet_prints_ready_and_exits_cleanly_on_signal(tmp_path, sig):
    config = tmp_path / "fleet.yaml"
    config.write_text(FLEET_YAML, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "app", "sim", "fleet", "--config", str(config)], cwd=REPO_ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(30, proc.kill)
    watchdog.start()
    try:
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        assert lines[2] == "fleet ready", lines
        words = [line.split() for line in lines[:2]]
        assert [w[:4] for w in words] == [["sim", "instance", "big-a", "big-model"],
                                          ["sim", "instance", "small-a", "small-model"]]
        with urllib.request.urlopen(f"{words[0][4]}/health", timeout=5) as resp:
            assert orjson.loads(resp.read()) == {"status": "ok"}
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert err == ""


def test_the_shipped_configs_models_keep_their_builtin_accuracy_and_price_class():
    """routelens.yaml tunes the two models' speed; replacing their whole profile gave both the default
    0.9 accuracy and the "standard" price, so no policy could differ on misroutes."""
    from router_core.config_file import read_config
    from sim.behaviour import BUILTIN_MODELS

    shipped = read_config(REPO_ROOT / "routelens.yaml")
    instances = [i.model_copy(update={"url": "http://127.0.0.1:0"}) for i in shipped.fleet.instances]
    config = shipped.model_copy(update={"fleet": shipped.fleet.model_copy(update={"instances": instances})})

    async def scenario():
        handle = await start_fleet(config)
        try:
            return {i: app[INSTANCE_KEY].engine.profile for i, app in handle.apps.items()}
        finally:
            await handle.close()

    builtin, served = {m.name: m.profile for m in BUILTIN_MODELS}, asyncio.run(scenario())
    for spec in instances:
        profile, known, tuned = served[spec.id], builtin[spec.model], shipped.sim.models[spec.model]
        assert profile.accuracy == known.accuracy and profile.cost_class == known.cost_class
        assert profile.base_latency_ms == tuned.base_latency_ms  # what the config sets wins
