"""HTTP layer: routers, dependencies and error mapping."""
