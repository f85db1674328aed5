"""Examples built on the gateway's libraries (``python -m examples.<name>``)."""
