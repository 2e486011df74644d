"""storage="weaviate": the DocumentArray API on a Weaviate server (weaviate-client v4)."""
