//! SQLSTATEs: the pipeline's failures mapped to them (each kind its own state, so that a
//! caller can tell an unreachable endpoint from a refused statement), and their five
//! characters on the worker's socket.

use grid_ask::FailureKind;
use pgrx::PgSqlErrorCode;

/// The SQLSTATE of a failure of the pipeline.
pub fn failure_sqlstate(kind: &FailureKind) -> PgSqlErrorCode {
    use FailureKind as K;
    use PgSqlErrorCode as C;
    match kind {
        K::EndpointUnset => C::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        K::InvalidValue => C::ERRCODE_INVALID_PARAMETER_VALUE,
        K::UnreadableFile => C::ERRCODE_UNDEFINED_FILE,
        K::NothingGranted | K::Refused => C::ERRCODE_INSUFFICIENT_PRIVILEGE,
        // The model said it cannot answer. PgSqlErrorCode is a closed list (an unknown
        // code becomes XX000), so no code of grid_pg's own: P0002 (no_data_found) is an
        // error (not the warning class 02) that names what happened, no answer found, and
        // that no other failure of grid_pg raises (docs/postgres.md, "Asking").
        K::Declined => C::ERRCODE_NO_DATA_FOUND,
        // PostgreSQL's own verdict: its SQLSTATE, as the backend reported it.
        K::Judged { code } => sqlstate_code(code),
        K::BudgetTooSmall => C::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        K::Cancelled => C::ERRCODE_QUERY_CANCELED,
        K::EndpointTimeout => C::ERRCODE_SYSTEM_ERROR,
        K::EndpointUnreachable => C::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
        K::EndpointFailed => C::ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
        K::VocabularyMismatch => C::ERRCODE_DATATYPE_MISMATCH,
        K::EndpointProtocol => C::ERRCODE_PROTOCOL_VIOLATION,
        K::EndpointDisconnected => C::ERRCODE_CONNECTION_FAILURE,
        // The step reached the endpoint; whether and what it sampled is unknown.
        K::EndpointReplyCut => C::ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN,
        K::EndpointTransport => C::ERRCODE_CONNECTION_EXCEPTION,
        K::Internal => C::ERRCODE_INTERNAL_ERROR,
    }
}

/// The five characters of an SQLSTATE (PostgreSQL packs them six bits each).
pub fn sqlstate_text(code: PgSqlErrorCode) -> String {
    let packed = code as i32;
    (0..5)
        .map(|i| char::from(b'0' + ((packed >> (6 * i)) & 0x3F) as u8))
        .collect()
}

/// The error code of a five-character SQLSTATE; `internal_error` for anything else.
pub fn sqlstate_code(text: &str) -> PgSqlErrorCode {
    let bytes = text.as_bytes();
    if bytes.len() != 5
        || !bytes
            .iter()
            .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
    {
        return PgSqlErrorCode::ERRCODE_INTERNAL_ERROR;
    }
    let packed = bytes.iter().enumerate().fold(0i32, |acc, (i, &b)| {
        acc | (i32::from((b - b'0') & 0x3F) << (6 * i))
    });
    PgSqlErrorCode::from(packed)
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn sqlstates_survive_the_trip() {
        for code in [
            PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION,
            PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        ] {
            assert_eq!(sqlstate_code(&sqlstate_text(code)), code);
        }
        assert_eq!(
            sqlstate_text(PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION),
            "08P01"
        );
        assert_eq!(
            sqlstate_text(PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE),
            "55P03"
        );
        for bad in ["", "0800", "08p01", "08P011", "é1234"] {
            assert_eq!(sqlstate_code(bad), PgSqlErrorCode::ERRCODE_INTERNAL_ERROR);
        }
    }

    #[test]
    fn each_endpoint_failure_has_its_own_sqlstate() {
        use FailureKind as K;
        let endpoint = [
            K::EndpointTimeout,
            K::EndpointUnreachable,
            K::EndpointFailed,
            K::VocabularyMismatch,
            K::EndpointProtocol,
            K::EndpointDisconnected,
            K::EndpointReplyCut,
            K::EndpointTransport,
        ];
        let states: std::collections::BTreeSet<String> = endpoint
            .iter()
            .map(|k| sqlstate_text(failure_sqlstate(k)))
            .collect();
        assert_eq!(states.len(), endpoint.len(), "{states:?}");
        assert_eq!(
            sqlstate_text(failure_sqlstate(&K::Judged {
                code: "42804".into()
            })),
            "42804"
        );
        assert_eq!(sqlstate_text(failure_sqlstate(&K::Refused)), "42501");
    }

    #[test]
    fn a_decline_has_a_sqlstate_no_other_failure_has() {
        use FailureKind as K;
        let declined = sqlstate_text(failure_sqlstate(&K::Declined));
        assert_eq!(declined, "P0002");
        let others = [
            K::EndpointUnset,
            K::InvalidValue,
            K::UnreadableFile,
            K::NothingGranted,
            K::Refused,
            K::BudgetTooSmall,
            K::Cancelled,
            K::EndpointTimeout,
            K::EndpointUnreachable,
            K::EndpointFailed,
            K::VocabularyMismatch,
            K::EndpointProtocol,
            K::EndpointDisconnected,
            K::EndpointReplyCut,
            K::EndpointTransport,
            K::Internal,
        ];
        for k in others {
            assert_ne!(sqlstate_text(failure_sqlstate(&k)), declined, "{k:?}");
        }
        // It survives the worker's socket, as its five characters.
        assert_eq!(
            sqlstate_code(&declined),
            PgSqlErrorCode::ERRCODE_NO_DATA_FOUND
        );
    }
}
