"""RouteLens sim."""
