//! Prompt provenance (sql/provenance.sql): `grid.trusted_author(oid)`, the one rule that
//! decides whose text (comments, descriptions, examples) may reach an
//! asker's prompt, and the `grid_curator` role through which a DBA vouches for an author.
//! The catalog snapshot applies it to every comment; see docs/security.md.

use pgrx::prelude::*;

extension_sql_file!(
    "../sql/provenance.sql",
    name = "provenance",
    requires = ["bootstrap"]
);

/// The roles whose text the caller may be shown (every role `grid.trusted_author` passes
/// for the caller), read as the caller: what a store read as its owner filters its rows'
/// authors by.
pub(crate) fn trusted_authors() -> Result<Vec<String>, pgrx::spi::Error> {
    Spi::get_one::<Vec<String>>(
        "SELECT coalesce(pg_catalog.array_agg(r.rolname::pg_catalog.text), '{}')
           FROM pg_catalog.pg_roles r WHERE grid.trusted_author(r.oid)",
    )
    .map(Option::unwrap_or_default)
}
