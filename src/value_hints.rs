//! Value hints (`grid.value_hints`): the few distinct values of the caller's readable text
//! columns, read as the caller in the asking backend and put into the catalog snapshot the
//! worker renders the prompt from (so the audit archives what the model was shown, and a
//! replay renders it again). Only columns a curator or the owner opted in
//! (`grid.show_values`, read with the descriptions by the same provenance rule) are read;
//! which of those qualify is decided in SQL at every ask (sql/value_hint_columns.sql:
//! string types, SELECT as the caller), so a REVOKE or an opt-out takes effect at the
//! next ask.
//! What counts as a category is `grid_core::catalog::ValueHint::of`.
//!
//! The values read are kept per backend for [`FRESH_FOR`], by role and column, within
//! [`KEPT_COLUMNS`]; columns under row security are read at every ask, since a policy may
//! show one role different rows in different sessions.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use serde_json::Value;

use grid_core::catalog::{ValueHint, HINT_VALUE_BYTES};

/// The qualifying columns of the snapshot's tables, as the caller.
const COLUMNS_QUERY: &str = include_str!("../sql/value_hint_columns.sql");

/// Longest reading of all hints of one ask when the caller has no `statement_timeout`.
const READ_TIMEOUT_MS: i32 = 10_000;

/// How long values read stay good for the next asks of the same role in this backend.
const FRESH_FOR: Duration = Duration::from_secs(60);

/// Columns whose values a backend keeps at most; past it they are all read again.
const KEPT_COLUMNS: usize = 4096;

/// (role, schema, relation, column, `grid.value_hints`, `grid.value_hints_rows`).
type Key = (String, String, String, String, i32, i32);

thread_local! {
    static KEPT: RefCell<HashMap<Key, (Instant, Option<ValueHint>)>> =
        RefCell::new(HashMap::new());
}

/// One qualifying column.
struct Column {
    schema: String,
    relation: String,
    name: String,
    row_security: bool,
}

/// Adds a value hint to every qualifying column of `snapshot` (the caller's, as
/// grid.catalog_snapshot's query returns it) among the `opted` ones (what
/// `crate::descriptions::add` returned), when `grid.value_hints` is above 0.
/// `search_path` is the caller's. A cancel is raised; any other error while reading
/// leaves the snapshot without hints (the question is still asked).
pub fn add(
    what: &str,
    snapshot: &mut Value,
    search_path: &str,
    opted: &[crate::descriptions::OptedIn],
) {
    let max = crate::guc::value_hints();
    if max == 0 || opted.is_empty() {
        return;
    }
    let rows = crate::guc::value_hints_rows();
    let role = snapshot["role"].as_str().unwrap_or_default().to_string();
    let read =
        crate::subtransaction::in_rolled_back_subtransaction(search_path, READ_TIMEOUT_MS, || {
            let columns = qualifying(opted)?;
            let mut hints = Vec::with_capacity(columns.len());
            for c in columns {
                let key: Key = (
                    role.clone(),
                    c.schema.clone(),
                    c.relation.clone(),
                    c.name.clone(),
                    max,
                    rows,
                );
                let hint = match kept(&key, c.row_security) {
                    Some(h) => h,
                    None => {
                        let h = read_column(&c, max, rows)?;
                        if !c.row_security {
                            keep(key, h.clone());
                        }
                        h
                    }
                };
                hints.push((c, hint));
            }
            Ok(hints)
        });
    let hints = match read {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => {
            pgrx::debug1!("{what}: no value hints: {e}");
            return;
        }
        Err(e) => match *e {
            CaughtError::PostgresError(r) | CaughtError::ErrorReport(r)
                if r.sql_error_code() != PgSqlErrorCode::ERRCODE_QUERY_CANCELED =>
            {
                pgrx::debug1!("{what}: no value hints: {}", r.message());
                return;
            }
            e => e.rethrow(),
        },
    };
    for (c, hint) in hints {
        let Some(hint) = hint else { continue };
        let Some(column) = find_column(snapshot, &c) else {
            continue;
        };
        if let Ok(v) = serde_json::to_value(hint) {
            column["value_hint"] = v;
        }
    }
}

fn qualifying(opted: &[crate::descriptions::OptedIn]) -> Result<Vec<Column>, pgrx::spi::Error> {
    let schemas: Vec<String> = opted.iter().map(|t| t.0.clone()).collect();
    let relations: Vec<String> = opted.iter().map(|t| t.1.clone()).collect();
    let columns: Vec<String> = opted.iter().map(|t| t.2.clone()).collect();
    Spi::connect(|c| {
        let rows = c.select(
            COLUMNS_QUERY,
            None,
            &[schemas.into(), relations.into(), columns.into()],
        )?;
        let mut out = Vec::new();
        for r in rows {
            let (Some(schema), Some(relation), Some(name)) = (
                r.get::<String>(1)?,
                r.get::<String>(2)?,
                r.get::<String>(3)?,
            ) else {
                continue;
            };
            out.push(Column {
                schema,
                relation,
                name,
                row_security: r.get::<bool>(4)?.unwrap_or(true),
            });
        }
        Ok(out)
    })
}

/// A name as PostgreSQL reads it back exactly: always quoted.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Reads the first `rows` rows of the column (one more, to know whether that was all)
/// as the caller.
fn read_column(c: &Column, max: i32, rows: i32) -> Result<Option<ValueHint>, pgrx::spi::Error> {
    let query = format!(
        "SELECT count(*), count(*) FILTER (WHERE octet_length(v) > {HINT_VALUE_BYTES}), \
                array_agg(DISTINCT v) FILTER (WHERE octet_length(v) <= {HINT_VALUE_BYTES}) \
           FROM (SELECT {col}::pg_catalog.text AS v FROM {schema}.{rel} LIMIT {limit}) s",
        col = quoted(&c.name),
        schema = quoted(&c.schema),
        rel = quoted(&c.relation),
        limit = i64::from(rows) + 1,
    );
    let (read, long, distinct) = Spi::connect(|client| {
        let row = client.select(&query, Some(1), &[])?.first();
        Ok::<_, pgrx::spi::Error>((
            row.get::<i64>(1)?.unwrap_or(0),
            row.get::<i64>(2)?.unwrap_or(0),
            row.get::<Vec<Option<String>>>(3)?.unwrap_or_default(),
        ))
    })?;
    let distinct: Vec<String> = distinct.into_iter().flatten().collect();
    let max = usize::try_from(max).unwrap_or(0);
    Ok(ValueHint::of(
        distinct,
        long > 0,
        read <= i64::from(rows),
        max,
    ))
}

fn kept(key: &Key, row_security: bool) -> Option<Option<ValueHint>> {
    if row_security {
        return None;
    }
    KEPT.with(|k| {
        k.borrow()
            .get(key)
            .filter(|(at, _)| at.elapsed() < FRESH_FOR)
            .map(|(_, h)| h.clone())
    })
}

fn keep(key: Key, hint: Option<ValueHint>) {
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        if k.len() >= KEPT_COLUMNS {
            k.clear();
        }
        k.insert(key, (Instant::now(), hint));
    });
}

fn find_column<'a>(snapshot: &'a mut Value, c: &Column) -> Option<&'a mut Value> {
    snapshot["relations"]
        .as_array_mut()?
        .iter_mut()
        .find(|r| r["schema"] == c.schema.as_str() && r["name"] == c.relation.as_str())?["columns"]
        .as_array_mut()?
        .iter_mut()
        .find(|col| col["name"] == c.name.as_str())
}
