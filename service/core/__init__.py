"""Configuration of the service."""
