//! Queries the terminal UI needs over large databases (keyset paging, per-scope counts).
