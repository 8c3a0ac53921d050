//! The grid_pg engine.
