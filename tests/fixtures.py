"""Fixture plugins: local servers that speak the real wire protocols (registered in conftest)."""
