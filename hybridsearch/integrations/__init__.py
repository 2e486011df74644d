"""Framework stores: hybridsearch collections behind the store interfaces of RAG frameworks
(LangChain, Haystack, LlamaIndex), each an optional extra imported only when its module is."""
