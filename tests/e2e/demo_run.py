"""``routelens demo`` as a user runs it: the shipped ``routelens.yaml`` as it is, data in a folder of the test's.

Nothing is rewritten: the folder comes from ``--data-dir``, and the ports are the ones the demo
prints (the shipped ones, or free ones when those are taken).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.conftest import ROOT, Proc

__all__ = ["Demo", "start_demo"]


@dataclass
class Demo:
    """A running demo and what it printed."""

    proc: Proc
    gateway: str
    app: str | None
    instances: dict[str, str]
    request_id: str | None

    @property
    def output(self) -> str:
        return "".join(self.proc.lines)

    @property
    def ports(self) -> list[int]:
        urls = [*self.instances.values(), self.gateway, *([self.app] if self.app else [])]
        return [int(u.rsplit(":", 1)[1]) for u in urls]


def start_demo(data_dir: Path, *args: str, timeout_s: float = 150) -> Demo:
    """Start ``routelens demo --config routelens.yaml --data-dir DATA_DIR ARGS`` and wait until it runs."""
    proc = Proc([sys.executable, "-m", "app", "demo", "--config", str(ROOT / "routelens.yaml"),
                 "--data-dir", str(data_dir), *args])
    proc.wait_for("Press Ctrl-C to stop.", timeout_s=timeout_s)
    out = "".join(proc.lines)
    gateway = re.search(r"^  gateway  (http://\S+)", out, re.M)
    assert gateway, out
    app = re.search(r"^  app      (http://\S+)", out, re.M)
    rid = re.search(r"example request_id: (\S+)", out)
    instances = dict(re.findall(r"^  instance (\S+) +(http://\S+)", out, re.M))
    return Demo(proc, gateway.group(1), app.group(1) if app else None, instances, rid.group(1) if rid else None)
