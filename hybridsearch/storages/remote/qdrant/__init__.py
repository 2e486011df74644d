"""storage="qdrant": qdrant-edge embedded, or a Qdrant server through qdrant-client."""
