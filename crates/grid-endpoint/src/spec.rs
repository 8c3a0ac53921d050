//! Which model an endpoint setting names: the one parser of `grid.endpoint` (the
//! extension's worker) and `grid generate --endpoint` (the CLI).
//!
//! - `mock:scripted` / `mock:scripted:<script file>`: the scripted mock, in process;
//! - `mock:adversarial`: the adversarial mock, in process;
//! - `http://…` / `https://…`: a `grid-endpoint/1` server;
//! - `openai+http://host:port[/v1]?model=NAME&tokenizer=DIR[&server=vllm|llama.cpp][&chunk=N][&template=flat|server][&eos=TOKEN]`
//!   (or `openai+https://…`): a stock OpenAI-compatible server (vLLM, llama.cpp's
//!   `llama-server`) used directly ([`crate::DirectClient`]).
//!
//! A stock server serves no vocabulary, so the direct form names a local tokenizer
//! (`tokenizer=`: a directory or file `grid_vocab::Vocabulary::load` reads, e.g. the served
//! model's `tokenizer.json` directory). The masks are over that vocabulary, and its
//! fingerprint (computed locally from its token bytes) is what the audit records; it must be
//! the served model's own tokenizer, which the server cannot confirm (an id outside it is
//! refused as a malformed reply). `model=` is the name the server serves the model under.
//! `server=` picks how masks are sent: `vllm` (the default) sends vLLM's
//! `allowed_token_ids` (falling back to `logit_bias` if refused) and asks for token ids in
//! replies; `llama.cpp` sends `logit_bias` (llama-server ignores `allowed_token_ids`
//! silently) and maps the replies' token strings back through the vocabulary. `chunk=` is
//! the tokens asked for per round (16). `template=` picks how the prompt's messages become
//! token ids: `flat` (the default) joins them and encodes the join with the local
//! tokenizer, as for a completion model; `server` has the server render them with the
//! served model's own chat template and tokenizer, as the llama backend does
//! ([`crate::DirectClient::render_chat`]), which an instruct model answers best. `eos=` names
//! the token that ends the model's reply, by its text among the tokenizer's special tokens or
//! by id (default: the tokenizer's own EOS): with `template=server` it must be the chat
//! template's end of turn (`<|im_end|>` for Qwen2.5, `<|eot_id|>` for Llama 3), which is
//! often not the tokenizer's EOS, or the model can never end its turn and the mask makes it
//! write on. Values are percent-decoded (`%20` is a blank).

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
    /// A stock OpenAI-compatible server, used directly.
    Direct(DirectSpec),
}

/// A stock OpenAI-compatible server as `openai+http(s)://…` names it (see the module
/// documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DirectSpec {
    /// The server root with its scheme (`http://host:port/v1`), without the query.
    pub url: String,
    /// The served model name (`model=`).
    pub model: String,
    /// The model's tokenizer on this machine (`tokenizer=`).
    pub tokenizer: PathBuf,
    /// Which server dialect the masks are sent in (`server=`).
    pub server: ServerKind,
    /// Tokens asked for per round (`chunk=`, at least 1).
    pub chunk: usize,
    /// How prompts are rendered (`template=`).
    pub template: PromptTemplate,
    /// The token that ends the reply (`eos=`: a special token's text, or an id), when it is
    /// not the tokenizer's EOS.
    pub eos: Option<String>,
}

/// How the direct mode renders a prompt's messages (`template=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PromptTemplate {
    /// The messages joined ([`crate::chat::render_plain`]) and encoded locally.
    Flat,
    /// The server's chat template and tokenizer.
    Server,
}

/// The dialect of a stock server (`server=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerKind {
    /// vLLM: `allowed_token_ids`, token ids in replies.
    Vllm,
    /// llama.cpp's `llama-server`: `logit_bias`, token strings in replies.
    LlamaCpp,
}

/// Tokens asked for per round by default.
pub(crate) const DEFAULT_CHUNK: usize = 16;

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
    #[error(
        "{0:?} is not an http(s) URL, an openai+http(s) URL, 'mock:scripted[:<script file>]' \
         or 'mock:adversarial'"
    )]
    Invalid(String),
    /// An `openai+http(s)://` setting that cannot be used as written.
    #[error(
        "{setting:?} is not a usable stock-server URL: {why} (the form is \
         'openai+http://host:port/v1?model=NAME&tokenizer=/path/to/tokenizer_dir', with \
         optional '&server=vllm|llama.cpp', '&chunk=N', '&template=flat|server' and '&eos=TOKEN')"
    )]
    Direct { setting: String, why: String },
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
        if let Some(rest) = e.strip_prefix("openai+") {
            if rest.starts_with("http://") || rest.starts_with("https://") {
                return DirectSpec::parse(rest)
                    .map(EndpointSpec::Direct)
                    .map_err(|why| SpecError::Direct {
                        setting: e.to_string(),
                        why,
                    });
            }
        }
        Err(SpecError::Invalid(e.to_string()))
    }

    /// Whether the model runs in process (a mock).
    pub fn is_mock(&self) -> bool {
        !matches!(self, EndpointSpec::Http(_) | EndpointSpec::Direct(_))
    }

    /// The model's name when it is a mock (what a served vocabulary names otherwise).
    pub fn mock_model(&self) -> Option<&'static str> {
        match self {
            EndpointSpec::Scripted(_) => Some("mock-scripted"),
            EndpointSpec::Adversarial => Some("mock-adversarial"),
            EndpointSpec::Http(_) | EndpointSpec::Direct(_) => None,
        }
    }
}

impl DirectSpec {
    /// `url` is the setting after `openai+`; the error says what is wrong with it.
    fn parse(url: &str) -> Result<DirectSpec, String> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let host = base.split_once("://").map_or("", |(_, h)| h);
        if host.is_empty() || host.starts_with('/') {
            return Err("the URL names no host".into());
        }
        let (mut model, mut tokenizer, mut server, mut chunk, mut template, mut eos) =
            (None, None, None, None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not key=value"))?;
            let v =
                percent_decode(v).ok_or_else(|| format!("{k}= is not percent-encoded UTF-8"))?;
            let slot = match k {
                "model" => &mut model,
                "tokenizer" => &mut tokenizer,
                "server" => &mut server,
                "chunk" => &mut chunk,
                "template" => &mut template,
                "eos" => &mut eos,
                _ => {
                    return Err(format!(
                        "unknown parameter {k:?} (known: model, tokenizer, server, chunk, \
                         template, eos)"
                    ))
                }
            };
            if slot.replace(v).is_some() {
                return Err(format!("{k}= is given twice"));
            }
        }
        let model = model
            .filter(|m| !m.is_empty())
            .ok_or("model= is missing: give the name the server serves the model under")?;
        let tokenizer = tokenizer.filter(|t| !t.is_empty()).ok_or(
            "tokenizer= is missing: give the path of the served model's tokenizer on this \
             machine (a directory with tokenizer.json, or vocab.json and merges.txt)",
        )?;
        let server = match server.as_deref() {
            None | Some("vllm") => ServerKind::Vllm,
            Some("llama.cpp") => ServerKind::LlamaCpp,
            Some(other) => return Err(format!("server={other} is not vllm or llama.cpp")),
        };
        let chunk = match chunk {
            None => DEFAULT_CHUNK,
            Some(c) => match c.parse::<usize>() {
                Ok(n) if (1..=1024).contains(&n) => n,
                _ => return Err(format!("chunk={c} is not a number from 1 to 1024")),
            },
        };
        let template = match template.as_deref() {
            None | Some("flat") => PromptTemplate::Flat,
            Some("server") => PromptTemplate::Server,
            Some(other) => return Err(format!("template={other} is not flat or server")),
        };
        Ok(DirectSpec {
            url: base.to_string(),
            model,
            tokenizer: PathBuf::from(tokenizer),
            server,
            chunk,
            template,
            eos: eos.filter(|e| !e.is_empty()),
        })
    }
}

/// `s` with `%XX` escapes decoded (`+` is kept: paths may hold it); `None` when an escape
/// is malformed or the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
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
        assert!(!"openai+http://h/v1?model=m&tokenizer=/t"
            .parse::<EndpointSpec>()
            .unwrap()
            .is_mock());
        assert!(!EndpointSpec::Http("http://h".into()).is_mock());
    }

    #[test]
    fn the_direct_form_parses_with_defaults_and_options() {
        let d = |s: &str| match s.parse::<EndpointSpec>() {
            Ok(EndpointSpec::Direct(d)) => d,
            other => panic!("{s}: {other:?}"),
        };
        let a = d("openai+http://127.0.0.1:8000/v1?model=Qwen/Qwen2.5&tokenizer=/m/qwen");
        assert_eq!(
            a,
            DirectSpec {
                url: "http://127.0.0.1:8000/v1".into(),
                model: "Qwen/Qwen2.5".into(),
                tokenizer: "/m/qwen".into(),
                server: ServerKind::Vllm,
                chunk: DEFAULT_CHUNK,
                template: PromptTemplate::Flat,
                eos: None,
            }
        );
        let b = d("openai+https://h?tokenizer=/a%20b&model=m&server=llama.cpp&chunk=4");
        assert_eq!(b.url, "https://h");
        assert_eq!(b.tokenizer, PathBuf::from("/a b"));
        assert_eq!((b.server, b.chunk), (ServerKind::LlamaCpp, 4));
        assert_eq!(b.template, PromptTemplate::Flat);
        let c = d("openai+http://h?model=m&tokenizer=/t&template=server&eos=%3C%7Cim_end%7C%3E");
        assert_eq!(c.template, PromptTemplate::Server);
        assert_eq!(c.eos.as_deref(), Some("<|im_end|>"));
    }

    #[test]
    fn a_bad_direct_form_says_what_is_wrong() {
        for (bad, says) in [
            ("openai+http://h/v1?tokenizer=/t", "model= is missing"),
            ("openai+http://h/v1?model=m", "tokenizer= is missing"),
            (
                "openai+http://h/v1?model=m&tokenizer=",
                "tokenizer= is missing",
            ),
            ("openai+http:///v1?model=m&tokenizer=/t", "names no host"),
            (
                "openai+http://h?model=m&tokenizer=/t&key=x",
                "unknown parameter \"key\"",
            ),
            (
                "openai+http://h?model=m&model=n&tokenizer=/t",
                "model= is given twice",
            ),
            (
                "openai+http://h?model=m&tokenizer=/t&server=tgi",
                "server=tgi",
            ),
            ("openai+http://h?model=m&tokenizer=/t&chunk=0", "chunk=0"),
            (
                "openai+http://h?model=m&tokenizer=/t&template=chatml",
                "template=chatml is not flat or server",
            ),
            ("openai+http://h?model=m&tokenizer=%zz", "percent-encoded"),
            ("openai+http://h?model", "not key=value"),
        ] {
            match bad.parse::<EndpointSpec>() {
                Err(e @ SpecError::Direct { .. }) => {
                    let m = e.to_string();
                    assert!(m.contains(says), "{bad}: {m}");
                    assert!(m.contains("openai+http://host:port/v1?model=NAME"), "{m}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert_eq!(
            "openai+ftp://h".parse::<EndpointSpec>(),
            Err(SpecError::Invalid("openai+ftp://h".into()))
        );
    }
}
