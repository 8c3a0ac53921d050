//! The question a user asks: what `grid.ask()` and the examples store refuse before
//! anything reaches a prompt, with the SQLSTATE each refusal raises.

use pgrx::PgSqlErrorCode;
use thiserror::Error;

/// Longest question, in bytes of UTF-8: the prompt's limit, so that every question the
/// backend sends on reaches the model with its schema.
pub const MAX_QUESTION_BYTES: usize = grid_core::prompt::MAX_QUESTION_BYTES;

/// A question `grid.ask()` refuses before anything is sent.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum QuestionError {
    #[error("grid.ask: the question is empty")]
    Empty,
    #[error(
        "grid.ask: the question is {0} bytes long; the limit is {MAX_QUESTION_BYTES} bytes: ask it in fewer words"
    )]
    TooLong(usize),
    #[error("grid.ask: the question contains the control character U+{code:04X} at character {position} (only tab, line feed and carriage return are allowed)")]
    Control { code: u32, position: usize },
}

impl QuestionError {
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            QuestionError::TooLong(_) => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            QuestionError::Empty | QuestionError::Control { .. } => {
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE
            }
        }
    }
}

/// Checks a question: not blank, at most [`MAX_QUESTION_BYTES`], no control characters
/// but tab, line feed and carriage return (they would reach the prompt unseen). Every
/// question it passes, [`grid_core::prompt::clean_question`] passes too.
pub fn check_question(question: &str) -> Result<(), QuestionError> {
    if question.len() > MAX_QUESTION_BYTES {
        return Err(QuestionError::TooLong(question.len()));
    }
    if question.trim().is_empty() {
        return Err(QuestionError::Empty);
    }
    match question
        .chars()
        .enumerate()
        .find(|(_, c)| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    {
        Some((position, c)) => Err(QuestionError::Control {
            code: u32::from(c),
            position,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn questions_are_checked_before_anything_is_sent() {
        assert_eq!(check_question(""), Err(QuestionError::Empty));
        assert_eq!(check_question(" \n\t "), Err(QuestionError::Empty));
        assert_eq!(
            check_question("a\u{7}b"),
            Err(QuestionError::Control {
                code: 7,
                position: 1
            })
        );
        assert_eq!(
            check_question("é\u{1b}[31m"),
            Err(QuestionError::Control {
                code: 0x1b,
                position: 1
            })
        );
        assert!(matches!(
            check_question("a\u{85}"),
            Err(QuestionError::Control { code: 0x85, .. })
        ));
        let long = "x".repeat(MAX_QUESTION_BYTES + 1);
        assert_eq!(
            check_question(&long),
            Err(QuestionError::TooLong(MAX_QUESTION_BYTES + 1))
        );
        assert_eq!(check_question(&long[1..]), Ok(()));
        assert_eq!(check_question("how many\r\n\tstaff?"), Ok(()));
        // The prompt takes whatever the backend lets through.
        for q in [
            "how many\r\n\tstaff?",
            &long[1..],
            "  padded  ",
            "é",
            "x\u{2028}y",
        ] {
            assert_eq!(check_question(q), Ok(()), "{q:?}");
            assert!(grid_core::prompt::clean_question(q).is_ok(), "{q:?}");
        }
    }
}
