"""The `dealer` command line: production commands here; tool commands load from `tools`."""
