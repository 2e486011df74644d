"""Storages on search servers: Elasticsearch / OpenSearch and Vespa."""
