"""The pre-training corpus and its builder, run as ``python -m corpus.make_corpus``."""
