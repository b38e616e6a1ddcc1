"""Helpers of the tools: argument checks, schemas from signatures, the daemon threads of sync function tools."""
