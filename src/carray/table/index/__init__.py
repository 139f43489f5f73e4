"""Table indexes: building, kinds and the query planner."""
