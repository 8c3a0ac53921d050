//! Chat prompts (`POST /v1/prompt`): the extension sends the conversation as messages
//! and the endpoint renders them as its model expects, with the model's own chat
//! template and tokenizer (a backend with a template, [`crate::Backend::render_chat`]),
//! or, for a backend without one (the mocks), as the plain join below encoded with the
//! served vocabulary's encoder.

use grid_vocab::Vocabulary;

use crate::protocol::ChatMessage;

/// What separates two messages in the plain rendering: one line feed.
pub(crate) const PLAIN_SEPARATOR: &str = "\n";

/// A rendered prompt: its text and the token ids that spell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedPrompt {
    /// The token ids (the generation's prompt).
    pub tokens: Vec<u32>,
    /// The rendered text.
    pub text: String,
}

/// Why a conversation could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The messages cannot be rendered as given (one holds the text of a control token
    /// of the model, or the template refuses the conversation): the caller's error.
    #[error("{0}")]
    Refused(String),
    /// The backend failed.
    #[error("{0}")]
    Backend(String),
}

/// Who rendered a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderedBy {
    /// The endpoint, with its model's chat template and tokenizer.
    Template,
    /// The endpoint (or the backend in process), plainly, since its backend has no
    /// template: [`render_plain`] encoded with the served vocabulary.
    Plain,
    /// The client, plainly, because the endpoint does not serve `POST /v1/prompt`.
    LocalPlain,
}

/// The plain rendering of a conversation without a template: the messages' contents in
/// order, joined by [`PLAIN_SEPARATOR`]; roles are not written and nothing is added.
pub fn render_plain(messages: &[ChatMessage]) -> String {
    messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join(PLAIN_SEPARATOR)
}

/// [`render_plain`] encoded with `vocab`'s encoder.
pub(crate) fn render_plain_with(vocab: &Vocabulary, messages: &[ChatMessage]) -> RenderedPrompt {
    let text = render_plain(messages);
    RenderedPrompt {
        tokens: vocab.encode(&text),
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Role;

    #[test]
    fn the_plain_join_is_the_contents_line_by_line() {
        let m = [
            ChatMessage::new(Role::System, "You write SQL."),
            ChatMessage::new(Role::User, "How many singers?"),
        ];
        assert_eq!(render_plain(&m), "You write SQL.\nHow many singers?");
        assert_eq!(render_plain(&m[..1]), "You write SQL.");
        assert_eq!(render_plain(&[]), "");
        let v = crate::backend::builtin::builtin_vocabulary().unwrap();
        let r = render_plain_with(&v, &m);
        assert_eq!(v.decode(&r.tokens), r.text.as_bytes());
    }
}
