"""RouteLens bench."""
