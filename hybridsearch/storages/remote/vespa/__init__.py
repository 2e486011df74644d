"""Vespa: storage, application package and YQL compiler."""
