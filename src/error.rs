//! The one way the extension raises an ERROR of its own: an SQLSTATE and a message made
//! ASCII, since a message may quote generated text or catalog names and must reach a
//! client of any `client_encoding` (PostgreSQL converts every message, and a character
//! the client's encoding cannot hold turns the error into an encoding error).

use pgrx::prelude::*;

/// Raises an ERROR with `code` and `message` (made ASCII).
pub fn raise(code: PgSqlErrorCode, message: String) -> ! {
    let message = grid_core::message::ascii(&message).into_owned();
    ereport!(ERROR, code, message);
}
