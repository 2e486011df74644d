"""hybridsearch: one DocumentArray API for CRUD, filters, vector, lexical and hybrid search."""
