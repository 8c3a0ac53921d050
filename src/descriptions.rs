//! Descriptions written for the model (`grid.descriptions`, sql/descriptions.sql): a note
//! on a relation or a column that `grid.ask()` shows in the prompt where the catalog
//! comment would be, in its place (`grid_core::prompt`), for a DBA who does not want to
//! change the catalog's `COMMENT ON` text.
//!
//! Writing ([`grid::describe`]): the caller must be allowed to `COMMENT ON` the relation
//! (owner, a role with the owner's privileges, superuser) or hold `grid_curator`'s
//! privileges; checked as the caller, then written as the store's owner
//! ([`crate::store`]), with the caller as `added_by`.
//!
//! Showing ([`add`], at each ask, in the asking backend): the authors the caller trusts
//! are read as the caller (`grid.trusted_author`); the store is read as its owner, only
//! the rows of those authors on relations of the caller's snapshot; each is put beside
//! the relation or column it names only where the snapshot lists it
//! (`grid_core::catalog::attach_descriptions`). The snapshot is the schema loader's
//! visibility rule (the relations the caller holds a privilege on, in schemas it may use;
//! the columns it holds a column privilege on), so a description is shown exactly where
//! a catalog comment could be, and a REVOKE takes it away at the next ask. The snapshot
//! goes to the worker with the descriptions in it, so the audit archives them with the
//! snapshot and the prompt artifact records the prompt as shown.
//!
//! Dropping: an event trigger deletes the descriptions of dropped relations and columns
//! ([`grid_forget_descriptions`]).

use pgrx::prelude::*;
use serde_json::Value;

use crate::error::raise;
use grid_core::catalog::{attach_descriptions, Description};
use grid_core::prompt::{clean_description, DescriptionError};

extension_sql_file!(
    "../sql/descriptions.sql",
    name = "descriptions",
    requires = ["provenance"]
);

/// The store.
const STORE: &str = "grid.descriptions";

/// Longest reading of the store when the caller has no `statement_timeout`.
const READ_TIMEOUT_MS: i32 = 10_000;

/// The rows by the authors `$1` (`name[]`) on the relations `$2`, `$3` (`text[]`,
/// schemas and names pairwise).
const ROWS: &str = "
SELECT n.nspname::pg_catalog.text, c.relname::pg_catalog.text,
       d.column_name::pg_catalog.text, d.description, d.show_values
  FROM grid.descriptions d
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.relation::pg_catalog.oid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
  JOIN ROWS FROM (pg_catalog.unnest($2::pg_catalog.text[]),
                 pg_catalog.unnest($3::pg_catalog.text[])) AS r(schema_name, rel_name)
    ON r.schema_name OPERATOR(pg_catalog.=) n.nspname::pg_catalog.text
   AND r.rel_name OPERATOR(pg_catalog.=) c.relname::pg_catalog.text
 WHERE d.added_by OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])
 ORDER BY 1, 2, 3 NULLS FIRST";

/// A column whose values a curator opted in (`grid.show_values`): schema, relation,
/// column.
pub type OptedIn = (String, String, String);

/// Puts into `snapshot` (the caller's, as grid.catalog_snapshot's query returns it) the
/// descriptions the caller may be shown, and returns the columns whose values it may be
/// shown (by the same rule: a trusted author's row on a relation of the snapshot; the
/// value hints check the column itself): see the module documentation. A cancel is
/// raised; any other failure leaves the snapshot without descriptions and returns no
/// column (the question is still asked), and nothing says whether a row exists.
pub fn add(what: &str, snapshot: &mut Value) -> Vec<OptedIn> {
    let (schemas, names): (Vec<String>, Vec<String>) = snapshot["relations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["schema"].as_str()?.into(), r["name"].as_str()?.into())))
        .unzip();
    if names.is_empty() {
        return Vec::new();
    }
    let trusted = match crate::provenance::trusted_authors() {
        Ok(t) if !t.is_empty() => t,
        Ok(_) => return Vec::new(),
        Err(e) => {
            pgrx::debug1!("{what}: no descriptions: reading the trusted authors: {e}");
            return Vec::new();
        }
    };
    let read = crate::store::read_as_owner(STORE, READ_TIMEOUT_MS, || {
        Spi::connect(|c| {
            let rows = c.select(ROWS, None, &[trusted.into(), schemas.into(), names.into()])?;
            let (mut described, mut opted) = (Vec::new(), Vec::new());
            for r in rows {
                let (Some(schema), Some(relation), column) = (
                    r.get::<String>(1)?,
                    r.get::<String>(2)?,
                    r.get::<String>(3)?,
                ) else {
                    continue;
                };
                if let (true, Some(c)) = (r.get::<bool>(5)?.unwrap_or(false), &column) {
                    opted.push((schema.clone(), relation.clone(), c.clone()));
                }
                if let Some(text) = r.get::<String>(4)? {
                    described.push(Description {
                        schema,
                        relation,
                        column,
                        text,
                    });
                }
            }
            Ok((described, opted))
        })
    });
    match read {
        Ok((descriptions, opted)) => {
            attach_descriptions(snapshot, &descriptions);
            opted
        }
        Err(why) => {
            pgrx::debug1!("{what}: no descriptions: {why}");
            Vec::new()
        }
    }
}

/// The relation described, as the caller sees it in the catalog.
struct Target {
    /// How messages name it (`regclass` output under the pinned path: schema-qualified).
    name: String,
    /// `relkind`, or `temporary` for a temporary relation.
    kind: String,
    /// Whether the caller may describe it.
    may: bool,
    caller: String,
}

fn spi<T>(r: Result<T, pgrx::spi::Error>, doing: &str) -> T {
    r.unwrap_or_else(|e| {
        raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("grid.describe: {doing}: {e}"),
        )
    })
}

/// Reads, as the caller, the relation `oid` and whether the caller may describe it: it
/// may `COMMENT ON` it (has the owner's privileges, as PostgreSQL's ownership check
/// asks; superusers do), or has the privileges of `grid_curator`.
fn target(oid: pg_sys::Oid) -> Option<Target> {
    let row = Spi::connect(|c| {
        let rows = c.select(
            "SELECT c.oid::pg_catalog.regclass::pg_catalog.text,
                    CASE WHEN c.relpersistence OPERATOR(pg_catalog.=) 't' THEN 'temporary'
                         ELSE c.relkind::pg_catalog.text END,
                    pg_catalog.pg_has_role(c.relowner, 'USAGE')
                    OR (EXISTS (SELECT FROM pg_catalog.pg_roles r
                                 WHERE r.rolname OPERATOR(pg_catalog.=) 'grid_curator')
                        AND pg_catalog.pg_has_role('grid_curator', 'USAGE')),
                    current_user::pg_catalog.text
               FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
            Some(1),
            &[oid.into()],
        )?;
        let mut out = None;
        for r in rows {
            out = Some(Target {
                name: r.get::<String>(1)?.unwrap_or_default(),
                kind: r.get::<String>(2)?.unwrap_or_default(),
                may: r.get::<bool>(3)?.unwrap_or(false),
                caller: r.get::<String>(4)?.unwrap_or_default(),
            });
        }
        Ok::<_, pgrx::spi::Error>(out)
    });
    spi(row, "reading the relation")
}

/// The relation (and column) `what` may write a row of the store for, as the caller:
/// raises what is wrong otherwise (who may: see the module documentation).
fn checked_target(what: &str, relation: pg_sys::Oid, column: Option<&str>) -> Target {
    // Held to the end of the transaction (the argument's own lock is released when the
    // function returns): a concurrent DROP waits until the row is committed, so that its
    // event trigger sees, and deletes, it.
    // SAFETY: a backend's main thread inside a transaction.
    unsafe { pg_sys::LockRelationOid(relation, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    let Some(t) = target(relation) else {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            format!(
                "{what}: no relation has oid {relation:?}: name the relation, e.g. 'public.orders'"
            ),
        );
    };
    if !t.may {
        raise(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "{what}: permission denied to describe {}: only a role that may COMMENT ON it (its owner) or a member of grid_curator may; describe it as its owner, or ask the DBA to GRANT grid_curator TO {}",
                t.name, t.caller
            ),
        );
    }
    // Temporary relations never reach a prompt (the snapshot leaves them out), and are
    // dropped at the end of a session without an event trigger firing.
    if !matches!(t.kind.as_str(), "r" | "p" | "v" | "m" | "f") {
        raise(
            PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            format!(
                "{what}: {} is not a table, view, materialized view or foreign table ({}): only those reach a prompt",
                t.name,
                if t.kind == "temporary" { "it is temporary" } else { "its relkind is not one of them" }
            ),
        );
    }
    if let Some(column) = column {
        let exists = Spi::get_one_with_args::<bool>(
            "SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                             WHERE a.attrelid OPERATOR(pg_catalog.=) $1
                               AND a.attname OPERATOR(pg_catalog.=) $2::pg_catalog.name
                               AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped)",
            &[relation.into(), column.into()],
        );
        if !spi(exists, "reading the column").unwrap_or(false) {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!(
                    "{what}: {} has no column \"{}\": name the column as it is stored (unquoted names are stored in lower case), or pass NULL to describe the relation itself",
                    t.name,
                    column.replace('"', "\"\"")
                ),
            );
        }
    }
    t
}

/// The store's owner, as whom rows are written.
fn store_owner(what: &str) -> pg_sys::Oid {
    spi(crate::store::owner_of(STORE), "finding the store").unwrap_or_else(|| {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            format!("{what}: {STORE} does not exist: reinstall the extension"),
        )
    })
}

/// The relation argument of `what`, which must name one. Kept open by the caller while
/// it writes, as the argument was.
fn named(what: &str, relation: Option<pgrx::PgRelation>) -> pgrx::PgRelation {
    match relation {
        Some(r) => r,
        None => raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("{what}: the relation is NULL: name one, e.g. 'public.orders'"),
        ),
    }
}

/// `grid.describe`'s body: see [`grid::describe`].
fn describe(relation: pg_sys::Oid, column: Option<&str>, text: Option<&str>) {
    let t = checked_target("grid.describe", relation, column);
    let text = match clean_description(text.unwrap_or("")) {
        Ok(t) => t,
        Err(e) => {
            let code = match e {
                DescriptionError::TooLong { .. } => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                DescriptionError::ControlCharacter { .. } => {
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE
                }
            };
            raise(code, format!("grid.describe: {e}: write a shorter note on one subject, without control characters"));
        }
    };
    let owner = store_owner("grid.describe");
    // Written as the store's owner; an error aborts the caller's (sub)transaction, which
    // restores the caller's identity. A row that still opts the column's values in
    // keeps them without its description.
    let column: Option<String> = column.map(str::to_string);
    let wrote = crate::store::as_role(owner, || {
        match text {
        None => Spi::run_with_args(
            "WITH kept AS (
                 UPDATE grid.descriptions SET description = NULL, added_by = $3::pg_catalog.name,
                        added_at = pg_catalog.now()
                  WHERE relation::pg_catalog.oid OPERATOR(pg_catalog.=) $1
                    AND column_name IS NOT DISTINCT FROM $2::pg_catalog.name
                    AND show_values)
             DELETE FROM grid.descriptions
              WHERE relation::pg_catalog.oid OPERATOR(pg_catalog.=) $1
                AND column_name IS NOT DISTINCT FROM $2::pg_catalog.name
                AND NOT show_values",
            &[relation.into(), column.into(), t.caller.clone().into()],
        ),
        Some(text) => Spi::run_with_args(
            "INSERT INTO grid.descriptions AS d (relation, column_name, description, added_by, added_at)
             VALUES ($1::pg_catalog.oid::pg_catalog.regclass, $2::pg_catalog.name, $3,
                     $4::pg_catalog.name, pg_catalog.now())
             ON CONFLICT (relation, column_name) DO UPDATE
                SET description = excluded.description, added_by = excluded.added_by,
                    added_at = excluded.added_at",
            &[
                relation.into(),
                column.into(),
                text.into(),
                t.caller.clone().into(),
            ],
        ),
    }
    });
    spi(wrote, "writing the description");
}

/// `grid.show_values`' body: see [`grid::show_values`].
fn show_values(relation: pg_sys::Oid, column: Option<&str>, shown: bool) {
    let Some(column) = column else {
        raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "grid.show_values: the column is NULL: values are shown per column; name one".into(),
        );
    };
    let t = checked_target("grid.show_values", relation, Some(column));
    let owner = store_owner("grid.show_values");
    let column = column.to_string();
    // The author of the row is whoever wrote it last, its description included: the
    // row is shown only when the asker trusts that author.
    let wrote = crate::store::as_role(owner, || {
        if shown {
            Spi::run_with_args(
                "INSERT INTO grid.descriptions AS d
                        (relation, column_name, show_values, added_by, added_at)
                 VALUES ($1::pg_catalog.oid::pg_catalog.regclass, $2::pg_catalog.name, true,
                         $3::pg_catalog.name, pg_catalog.now())
                 ON CONFLICT (relation, column_name) DO UPDATE
                    SET show_values = true, added_by = excluded.added_by,
                        added_at = excluded.added_at",
                &[
                    relation.into(),
                    column.clone().into(),
                    t.caller.clone().into(),
                ],
            )
        } else {
            Spi::run_with_args(
                "WITH kept AS (
                     UPDATE grid.descriptions SET show_values = false,
                            added_by = $3::pg_catalog.name, added_at = pg_catalog.now()
                      WHERE relation::pg_catalog.oid OPERATOR(pg_catalog.=) $1
                        AND column_name OPERATOR(pg_catalog.=) $2::pg_catalog.name
                        AND description IS NOT NULL)
                 DELETE FROM grid.descriptions
                  WHERE relation::pg_catalog.oid OPERATOR(pg_catalog.=) $1
                    AND column_name OPERATOR(pg_catalog.=) $2::pg_catalog.name
                    AND description IS NULL",
                &[
                    relation.into(),
                    column.clone().into(),
                    t.caller.clone().into(),
                ],
            )
        }
    });
    spi(wrote, "writing the column's setting");
}

/// The SQL API in schema `grid`.
#[pg_schema]
mod grid {
    use pgrx::prelude::*;

    /// `grid.describe(relation, column_name, description)`: stores `description` as the
    /// note the model is shown for `relation` (its column `column_name`, or the relation
    /// itself when NULL), replacing any before; a NULL or blank description removes it.
    /// SECURITY INVOKER: see [`super::describe`] for who may.
    #[pg_extern(security_invoker, volatile)]
    #[search_path(pg_catalog, pg_temp)]
    fn describe(
        relation: Option<pgrx::PgRelation>,
        column_name: Option<&str>,
        description: Option<&str>,
    ) {
        let relation = super::named("grid.describe", relation);
        super::describe(relation.oid(), column_name, description);
    }

    /// `grid.show_values(relation, column_name, shown)`: whether the values of the column
    /// may be shown to the model beside it (value hints, `grid.value_hints`), for askers
    /// who may read it and trust the caller as an author. Off for every column until a
    /// curator or the relation's owner turns it on: values are words whoever wrote the
    /// rows chose. SECURITY INVOKER: who may is who may describe the relation.
    #[pg_extern(security_invoker, volatile)]
    #[search_path(pg_catalog, pg_temp)]
    fn show_values(
        relation: Option<pgrx::PgRelation>,
        column_name: Option<&str>,
        shown: default!(bool, true),
    ) {
        let relation = super::named("grid.show_values", relation);
        super::show_values(relation.oid(), column_name, shown);
    }
}

extension_sql!(
    "COMMENT ON FUNCTION grid.show_values(regclass, text, boolean) IS \
     'Opts a column''s values in (or out, shown => false) for value hints (grid.value_hints) in grid.ask prompts. For the relation''s owner and members of grid_curator.';",
    name = "show_values_comment",
    requires = [grid::show_values, "descriptions"]
);

extension_sql!(
    "COMMENT ON FUNCTION grid.describe(regclass, text, text) IS \
     'Describes a relation (column NULL) or one of its columns for the model, in place of its comment in grid.ask prompts; a NULL description removes it. For its owner and members of grid_curator.';",
    name = "describe_comment",
    requires = [grid::describe, "descriptions"]
);

/// `pg_finfo` of [`grid_forget_descriptions`]: a version-1 C function.
#[no_mangle]
pub extern "C" fn pg_finfo_grid_forget_descriptions() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `grid.forget_descriptions()`, the `sql_drop` event trigger's function (pgrx declares no
/// event trigger functions, so sql/descriptions.sql declares it): deletes, as the store's
/// owner, the descriptions of the relations and columns the command dropped. Without the
/// store (`DROP EXTENSION` drops it too) it does nothing.
///
/// # Safety
/// Called by PostgreSQL's function manager as an event trigger.
#[pg_guard]
#[no_mangle]
pub unsafe extern "C-unwind" fn grid_forget_descriptions(
    _fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    let owner = match crate::store::owner_of(STORE) {
        Ok(Some(o)) => o,
        Ok(None) => return pg_sys::Datum::from(0),
        Err(e) => raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("grid.forget_descriptions: finding the store: {e}"),
        ),
    };
    let forgot = crate::store::as_role(owner, || {
        Spi::run(
            "DELETE FROM grid.descriptions d
               USING pg_catalog.pg_event_trigger_dropped_objects() o
              WHERE o.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                AND o.objid OPERATOR(pg_catalog.=) d.relation::pg_catalog.oid
                AND (o.objsubid OPERATOR(pg_catalog.=) 0
                     OR d.column_name OPERATOR(pg_catalog.=) o.address_names[3]::pg_catalog.name)",
        )
    });
    if let Err(e) = forgot {
        raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("grid.forget_descriptions: {e}"),
        );
    }
    pg_sys::Datum::from(0)
}
