"""What a query means, independent of where it runs: the filter AST, fusion, planning."""
