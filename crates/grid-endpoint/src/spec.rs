//! Which model an endpoint setting names: the one parser of `grid.endpoint` (the
//! extension's worker) and `grid generate --endpoint` (the CLI).
//!
//! - `mock:scripted` / `mock:scripted:<script file>`: the scripted mock, in process;
//! - `mock:adversarial`: the adversarial mock, in process;
//! - `http://…` / `https://…`: a `grid-endpoint/1` server.

use std::path::PathBuf;

use thiserror::Error;

/// The model a setting names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EndpointSpec {
    /// `mock:scripted[:<script file>]`: the scripted mock, with the script of that file
    /// (the host's default script without one).
    Scripted(Option<PathBuf>),
    /// `mock:adversarial`.
    Adversarial,
    /// A `grid-endpoint/1` server at this URL.
    Http(String),
}

/// A setting that names no model (displayed after the setting's name: "grid.endpoint is
/// not set: …", "grid.endpoint \"x\" is not …").
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpecError {
    #[error(
        "not set: set it to the URL of a grid-endpoint/1 server (e.g. \
         'http://127.0.0.1:8077'), or 'mock:scripted:<script file>' or 'mock:adversarial' \
         for the built-in mock models"
    )]
    Unset,
    #[error("{0:?} is not an http(s) URL, 'mock:scripted[:<script file>]' or 'mock:adversarial'")]
    Invalid(String),
}

impl EndpointSpec {
    /// The model `setting` names (surrounding blanks ignored); `None` or blank is
    /// [`SpecError::Unset`].
    pub fn parse(setting: Option<&str>) -> Result<EndpointSpec, SpecError> {
        let e = setting.map(str::trim).unwrap_or("");
        if e.is_empty() {
            return Err(SpecError::Unset);
        }
        if e == "mock:adversarial" {
            return Ok(EndpointSpec::Adversarial);
        }
        if e == "mock:scripted" {
            return Ok(EndpointSpec::Scripted(None));
        }
        if let Some(path) = e.strip_prefix("mock:scripted:") {
            return Ok(EndpointSpec::Scripted(Some(PathBuf::from(path))));
        }
        if e.starts_with("http://") || e.starts_with("https://") {
            return Ok(EndpointSpec::Http(e.to_string()));
        }
        Err(SpecError::Invalid(e.to_string()))
    }

    /// Whether the model runs in process (a mock).
    pub fn is_mock(&self) -> bool {
        !matches!(self, EndpointSpec::Http(_))
    }

    /// The model's name when it is a mock (what a served vocabulary names otherwise).
    pub fn mock_model(&self) -> Option<&'static str> {
        match self {
            EndpointSpec::Scripted(_) => Some("mock-scripted"),
            EndpointSpec::Adversarial => Some("mock-adversarial"),
            EndpointSpec::Http(_) => None,
        }
    }
}

impl std::str::FromStr for EndpointSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<EndpointSpec, SpecError> {
        EndpointSpec::parse(Some(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_anything_else_is_refused() {
        assert_eq!(EndpointSpec::parse(None), Err(SpecError::Unset));
        assert_eq!(EndpointSpec::parse(Some("  ")), Err(SpecError::Unset));
        assert_eq!(
            "mock:adversarial".parse::<EndpointSpec>(),
            Ok(EndpointSpec::Adversarial)
        );
        assert_eq!(
            " mock:scripted ".parse::<EndpointSpec>(),
            Ok(EndpointSpec::Scripted(None))
        );
        assert_eq!(
            "mock:scripted:/tmp/s.json".parse::<EndpointSpec>(),
            Ok(EndpointSpec::Scripted(Some("/tmp/s.json".into())))
        );
        assert_eq!(
            "https://h:1/".parse::<EndpointSpec>(),
            Ok(EndpointSpec::Http("https://h:1/".into()))
        );
        for bad in ["mock:other", "ftp://h", "127.0.0.1:8077", "mock:scripted/x"] {
            assert_eq!(
                bad.parse::<EndpointSpec>(),
                Err(SpecError::Invalid(bad.into())),
                "{bad}"
            );
        }
        assert!(EndpointSpec::Adversarial.is_mock());
        assert!(!EndpointSpec::Http("http://h".into()).is_mock());
    }
}
