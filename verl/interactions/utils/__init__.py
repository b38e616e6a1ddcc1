"""The interaction YAML loader."""
