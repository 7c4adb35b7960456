"""Version of the trace contract; bump on any change to a stored model."""

SCHEMA_VERSION: int = 2

__all__ = ["SCHEMA_VERSION"]
