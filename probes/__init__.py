"""RouteLens probes."""
