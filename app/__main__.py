"""``python -m app`` is the ``routelens`` command."""

from app.cli import main

raise SystemExit(main())
