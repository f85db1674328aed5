"""Developer tools run from the repository root (``python -m tools.<name>``); never imported by
the gateway itself."""
