"""Process wiring: the gateway server (``serve``), the demo, and the child processes they start."""
