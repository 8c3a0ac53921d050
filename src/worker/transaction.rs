//! The worker's own transactions: what it writes is committed before it answers, so
//! nothing the caller does afterwards (a ROLLBACK included) can take it back.
//!
//! An ERROR raised inside (a lock timeout, a constraint, a missing table) rolls the
//! transaction back and comes back as a [`Failure`] with its SQLSTATE; it must not end the
//! worker, which serves every backend.

use std::panic::AssertUnwindSafe;

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::PgTryBuilder;

/// Why a transaction of the worker did not commit.
#[derive(Debug, Clone)]
pub struct Failure {
    pub sqlstate: PgSqlErrorCode,
    pub message: String,
}

impl Failure {
    pub fn new(sqlstate: PgSqlErrorCode, message: impl Into<String>) -> Failure {
        Failure {
            sqlstate,
            message: message.into(),
        }
    }
}

fn caught(error: CaughtError) -> Failure {
    match error {
        CaughtError::PostgresError(report) | CaughtError::ErrorReport(report) => Failure {
            sqlstate: report.sql_error_code(),
            message: report.message().to_string(),
        },
        CaughtError::RustPanic { ereport, .. } => Failure {
            sqlstate: PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            message: ereport.message().to_string(),
        },
    }
}

/// Runs `body` in a new transaction and commits it, or rolls it back when `body` fails or
/// raises. Main thread of the worker only, outside any transaction.
pub fn committed<T>(body: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    // SAFETY: the worker's main thread, connected to its database, between transactions.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    let outcome = PgTryBuilder::new(AssertUnwindSafe(body))
        .catch_others(|e| Err(caught(e)))
        .execute();
    let outcome = outcome.and_then(|value| {
        PgTryBuilder::new(|| {
            // SAFETY: the snapshot pushed above, in the transaction started above.
            unsafe {
                pg_sys::PopActiveSnapshot();
                pg_sys::CommitTransactionCommand();
            }
            Ok(())
        })
        .catch_others(|e| Err(caught(e)))
        .execute()
        .map(|()| value)
    });
    if outcome.is_err() {
        // SAFETY: aborting also releases the snapshot, the locks and SPI's state; it is
        // what PostgreSQL's own error recovery does between transactions.
        unsafe { pg_sys::AbortCurrentTransaction() };
    }
    outcome
}
