"""The C extension only; everything else about the package is in pyproject.toml.

``ingest.codec._ndjson_arrow`` is the fast path of ``ingest/codec/to_arrow.py`` (our JSON records into
Arrow buffers). Building it needs a C compiler and Python's headers; where they are missing the
install goes on without it (``optional``) and Arrow's JSON reader does its work, about three times
slower (``tests/ingest/codec/test_fast_decoder.py`` fails then, so that CI notices).

``ingest.otel._otlp_wire`` is the fast path of ``ingest/otel/wire.py`` (spans into the OTLP protobuf
body; its ``_otlp_traces.c`` writes a stored trace's spans straight from its JSON, the fast path of
``ingest/otel/spans.py``), optional the same way: without it the Python builder and encoder write the
same bytes at several times the CPU (``tests/ingest/otel/test_wire.py`` fails then).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension(
        "ingest.codec._ndjson_arrow", ["ingest/codec/_ndjson_arrow.c"], extra_compile_args=["-O2"], optional=True,
    ),
    Extension("ingest.otel._otlp_wire", ["ingest/otel/_otlp_wire.c", "ingest/otel/_otlp_traces.c"],
              depends=["ingest/otel/_otlp_wire.h"], extra_compile_args=["-O2"], optional=True),
])
