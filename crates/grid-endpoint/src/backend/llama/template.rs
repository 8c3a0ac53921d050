//! A model's chat template (the Jinja source its GGUF carries as
//! `tokenizer.chat_template`), rendered as Hugging Face `apply_chat_template` renders it:
//! Jinja with `trim_blocks` and `lstrip_blocks`, Python string methods, the variables
//! `messages`, `add_generation_prompt` (always true: the assistant's turn is opened),
//! `bos_token` and `eos_token`, and `raise_exception`.
//!
//! llama.cpp's own `llama_chat_apply_template` only recognises well-known templates by
//! their markers and renders its own approximation of them (for Qwen2.5 it omits the
//! default system message the template adds when none is given), so the template is
//! interpreted here, with minijinja.

use minijinja::syntax::SyntaxConfig;
use minijinja::{context, Environment, Error, ErrorKind};

use crate::protocol::ChatMessage;

/// A compiled chat template.
#[derive(Debug)]
pub(crate) struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// Compiles `source`; `bos` and `eos` are the texts of the model's BOS and EOS tokens
    /// (empty when it has none).
    pub(crate) fn new(source: String, bos: String, eos: String) -> Result<Self, String> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| format!("chat template syntax: {e}"))?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned(NAME, source)
            .map_err(|e| format!("the model's chat template does not compile: {e}"))?;
        Ok(ChatTemplate { env, bos, eos })
    }

    /// `messages` rendered, the assistant's turn opened.
    pub(crate) fn render(&self, messages: &[ChatMessage]) -> Result<String, String> {
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| format!("chat template: {e}"))?;
        let messages: Vec<minijinja::Value> = messages
            .iter()
            .map(|m| context! { role => m.role.as_str(), content => m.content.as_str() })
            .collect();
        tmpl.render(context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => self.bos.as_str(),
            eos_token => self.eos.as_str(),
        })
        .map_err(|e| format!("rendering the chat template: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Role;

    /// Qwen2.5's template without its tool branches (the GGUF's full text is exercised by
    /// the real-model tests).
    const QWEN: &str = r#"{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- else %}
    {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant") %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"#;

    #[test]
    fn renders_a_qwen_conversation_with_the_turn_opened() {
        let t = ChatTemplate::new(QWEN.into(), String::new(), "<|im_end|>".into()).unwrap();
        let m = [
            ChatMessage::new(Role::System, "You write SQL."),
            ChatMessage::new(Role::User, "How many singers?"),
        ];
        assert_eq!(
            t.render(&m).unwrap(),
            "<|im_start|>system\nYou write SQL.<|im_end|>\n<|im_start|>user\nHow many singers?<|im_end|>\n<|im_start|>assistant\n"
        );
        // Without a system message the template adds its own.
        let u = t.render(&m[1..]).unwrap();
        assert!(u.starts_with("<|im_start|>system\nYou are Qwen"));
    }

    #[test]
    fn python_methods_blocks_and_exceptions() {
        let src = "{{ bos_token }}{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('roles must alternate') }}{% endif %}\n[{{ m.content.strip() | upper }}]\n{% endfor %}";
        let t = ChatTemplate::new(src.into(), "<s>".into(), "</s>".into()).unwrap();
        let m = [ChatMessage::new(Role::User, "  hi ")];
        assert_eq!(t.render(&m).unwrap(), "<s>[HI]\n");
        let err = t
            .render(&[ChatMessage::new(Role::System, "x")])
            .unwrap_err();
        assert!(err.contains("roles must alternate"), "{err}");
        assert!(ChatTemplate::new("{% if %}".into(), String::new(), String::new()).is_err());
    }
}
