"""The benchmark graphs and their builder, run as ``python -m graphs.make_graphs``."""
