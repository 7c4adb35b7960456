"""RouteLens ingest."""
