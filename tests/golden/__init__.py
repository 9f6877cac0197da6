"""Golden placements: what the placers answered before a refactoring, to check they answer the same after."""
