"""Teacher loading, student construction and feature capture."""
