"""RouteLens app."""
