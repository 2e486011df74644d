"""Elasticsearch and OpenSearch: storage and query compiler."""
