"""The admin endpoints of a simulated instance: fault injection and forced gauge values.

- ``GET /admin/faults``: ``{"active": [...], "history": [...]}``, each a fault record: a fault still in
  force is under ``active`` only, ``history`` lists those that ended (cleared, expired, restarted).
- ``POST /admin/faults`` with a :class:`sim.faults.FaultSpec` body: starts it, answers 201 and the record.
- ``DELETE /admin/faults`` ends every active fault; ``DELETE /admin/faults/{id}`` ends one (404 if unknown).
- ``GET``/``POST /admin/overrides``: gauge values forced regardless of load (null clears one).

Bad bodies get an OpenAI-style 400 naming the field; the instance keeps serving.
"""

from __future__ import annotations

from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from sim.exposition import Overrides
from sim.faults import FaultSpec
from sim.lifecycle import LifecycleMixin
from sim.openai_api import ApiError, json_response

__all__ = ["add_admin_routes"]

M = TypeVar("M", bound=BaseModel)


def _invalid(exc: ValidationError, what: str) -> web.Response:
    first = exc.errors()[0]
    param = ".".join(str(part) for part in first["loc"]) or None
    return ApiError(f"invalid {what}: {first['msg']}", param, "invalid_value").response()


def _parse(model: type[M], raw: bytes, what: str) -> M | web.Response:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        return _invalid(exc, what)


def add_admin_routes(app: web.Application, instance: LifecycleMixin) -> None:
    """Add the ``/admin/...`` routes of ``instance`` to ``app``.

    They reach only the instance's fault handling (its fault book, ``inject``/``clear`` and the
    gauge overrides), so any :class:`~sim.lifecycle.LifecycleMixin` will do; the server that
    assembles the application imports this module, never the reverse.
    """

    async def list_faults(request: web.Request) -> web.Response:
        instance.faults.expire()
        return json_response({"instance": instance.spec.id,
                              "active": [r.to_json() for r in instance.faults.active()],
                              "history": [r.to_json() for r in instance.faults.ended()]})

    async def post_fault(request: web.Request) -> web.Response:
        spec = _parse(FaultSpec, await request.read(), "fault")
        if isinstance(spec, web.Response):
            return spec
        return json_response(instance.inject(spec).to_json(), status=201)

    async def delete_faults(request: web.Request) -> web.Response:
        fault_id = request.match_info.get("fault_id")
        if fault_id is None:
            return json_response({"ended": [r.to_json() for r in instance.clear()]})
        record = instance.faults.by_id(fault_id)
        if record is None:
            return ApiError(f"no fault '{fault_id}' on instance {instance.spec.id}", "fault_id", "fault_not_found",
                            status=404).response()
        return json_response({"ended": [r.to_json() for r in instance.clear(record)]})

    async def get_overrides(request: web.Request) -> web.Response:
        return json_response(instance.metrics.overrides.model_dump())

    async def post_overrides(request: web.Request) -> web.Response:
        patch = _parse(Overrides, await request.read(), "overrides")
        if isinstance(patch, web.Response):
            return patch
        instance.metrics.overrides = instance.metrics.overrides.merge(patch)
        return await get_overrides(request)

    app.router.add_get("/admin/faults", list_faults)
    app.router.add_post("/admin/faults", post_fault)
    app.router.add_delete("/admin/faults", delete_faults)
    app.router.add_delete("/admin/faults/{fault_id}", delete_faults)
    app.router.add_get("/admin/overrides", get_overrides)
    app.router.add_post("/admin/overrides", post_overrides)
