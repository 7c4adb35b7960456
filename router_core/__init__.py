"""RouteLens router_core."""
