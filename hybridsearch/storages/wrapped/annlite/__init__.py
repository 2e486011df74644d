"""The annlite storage and its filter compiler."""
