"""The embedded engine: columns, filter programs, lexical index, persistence. The only importer of _native."""
