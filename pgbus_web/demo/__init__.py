"""The demo: workflows whose runs reach every status and stuck reason."""
