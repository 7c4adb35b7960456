"""``python -m probes.contracts OPENAPI.json``: regenerate the runtime response schema."""

import sys

from probes.contracts import write_response_schema

raise SystemExit(write_response_schema(sys.argv[1:]))
