"""The sqlite storage: a real SQLite file mirrored in the engine's columns, with its SQL compiler."""
