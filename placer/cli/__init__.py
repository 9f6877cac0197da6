"""The `placer` command line; each command lives in its own module here."""
