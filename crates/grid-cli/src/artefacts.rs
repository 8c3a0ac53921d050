//! The artefact list written beside an `--audit-out` log (`<log>.artefacts.json`): what a
//! replay loads to recompute the masks (the tokenizer, the schema file and database, the
//! policy). It is not trusted: the replay rebuilds each language and checks its
//! fingerprints against the seals before using it.
//!
//! ```json
//! {"artefacts":[{"tokenizer":"/data/tokenizers/gpt2","tables":"/data/spider/tables.json",
//!   "db":"concert_singer","policy":"{\"verbs\":[\"select\"],…}"}]}
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One set of artefacts (one language over one vocabulary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artefact {
    pub tokenizer: PathBuf,
    pub tables: PathBuf,
    pub db: String,
    /// The policy's canonical JSON.
    pub policy: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub artefacts: Vec<Artefact>,
}

impl Manifest {
    /// Where the list of the log at `log` is kept.
    pub fn path_for(log: &Path) -> PathBuf {
        let mut p = log.as_os_str().to_owned();
        p.push(".artefacts.json");
        PathBuf::from(p)
    }

    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }

    pub fn read(path: &Path) -> Result<Manifest, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}
