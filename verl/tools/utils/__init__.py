"""Helpers of the tools: the YAML loader, argument checks, schemas from signatures, safe arithmetic, the daemon
threads of sync function tools."""
