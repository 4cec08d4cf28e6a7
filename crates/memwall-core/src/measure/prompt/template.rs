//! Chat templates: the GGUF's own `tokenizer.chat_template` (Jinja), rendered with
//! minijinja the way Hugging Face `transformers` renders it (`trim_blocks`,
//! `lstrip_blocks`, loop controls, Python string/dict methods through
//! minijinja-contrib's `pycompat`, a `raise_exception` function).
//!
//! llama.cpp's own `llama_chat_apply_template` only recognises templates by pattern
//! and fills in a fixed format; it does not run the template. Qwen2.5's template, for
//! one, adds a default system message when the conversation has none, which the
//! built-in `chatml` format does not. memwall never uses the matcher: a file without
//! a template gets [`super::FALLBACK_TEMPLATE`], rendered here like any other.

use crate::measure::engine::{ChatMessage, TokenId};
use minijinja::{Environment, Error, ErrorKind, context};
use std::path::Path;

/// GGUF key of the chat template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// A template that failed to parse or raised while rendering; the message is the
/// template's own (e.g. "System role not supported").
#[derive(Debug, thiserror::Error)]
#[error("chat template: {0}")]
pub struct TemplateError(pub String);

impl From<Error> for TemplateError {
    fn from(e: Error) -> Self {
        // A raised exception's message is the detail; syntax errors name the line.
        let msg = match (e.kind(), e.detail()) {
            (ErrorKind::InvalidOperation, Some(d)) => d.to_string(),
            _ => {
                let mut s = e.to_string();
                if let Some(d) = e.detail()
                    && !s.contains(d)
                {
                    s = format!("{s}: {d}");
                }
                s
            }
        };
        TemplateError(msg)
    }
}

/// A compiled Jinja chat template with the model's BOS and EOS texts.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Compiles `source`; `bos_token`/`eos_token` are the texts templates see.
    ///
    /// # Errors
    /// [`TemplateError`] on a syntax error.
    pub fn new(
        source: &str,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<ChatTemplate, TemplateError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_function("strftime_now", |fmt: String| -> String {
            chrono::Utc::now().format(&fmt).to_string()
        });
        env.add_template_owned("chat", source.to_string())?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.into(),
            eos_token: eos_token.into(),
        })
    }

    /// The template stored in the GGUF at `path`, `None` when it has none.
    ///
    /// # Errors
    /// [`TemplateError`] when the file cannot be read (naming it).
    pub fn source_of(path: &Path) -> Result<Option<String>, TemplateError> {
        let g = crate::probe::gguf::Gguf::open(path).map_err(|e| TemplateError(e.to_string()))?;
        Ok(g.get(CHAT_TEMPLATE_KEY)
            .and_then(|v| v.as_str())
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string))
    }

    /// Renders `messages` with `add_generation_prompt = true` (the prompt ends with
    /// the assistant's opening tag).
    ///
    /// # Errors
    /// [`TemplateError`] with the template's message when it raises.
    pub fn render(&self, messages: &[ChatMessage]) -> Result<String, TemplateError> {
        let t = self.env.get_template("chat")?;
        Ok(t.render(context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => self.bos_token,
            eos_token => self.eos_token,
        })?)
    }
}

/// Places exactly one BOS in front of a rendered prompt's tokens: `tokens` came from
/// tokenizing the rendered text without adding specials, so a BOS is there only when
/// the template wrote it; `bos` is the model's BOS when it wants one.
pub fn one_bos(mut tokens: Vec<TokenId>, bos: Option<TokenId>) -> Vec<TokenId> {
    if let Some(b) = bos {
        let lead = tokens.iter().take_while(|&&t| t == b).count();
        match lead {
            0 => tokens.insert(0, b),
            1 => {}
            n => {
                tokens.drain(..n - 1);
            }
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }

    #[test]
    fn renders_loops_and_python_methods() {
        let t = ChatTemplate::new(
            "{{ bos_token }}{% for m in messages %}{% if loop.index0 > 5 %}{% break %}{% endif %}[{{ m.role.upper() }}]{{ m.content.strip() }}\n{% endfor %}{% if add_generation_prompt %}[A]{% endif %}",
            "<s>",
            "</s>",
        )
        .unwrap();
        let out = t
            .render(&[msg("user", "  hi  "), msg("assistant", "yo")])
            .unwrap();
        assert_eq!(out, "<s>[USER]hi\n[ASSISTANT]yo\n[A]");
    }

    #[test]
    fn a_raised_exception_is_the_error_message() {
        let t = ChatTemplate::new(
            "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}ok",
            "",
            "",
        )
        .unwrap();
        let e = t.render(&[msg("system", "x")]).unwrap_err();
        assert_eq!(e.to_string(), "chat template: System role not supported");
        assert_eq!(t.render(&[msg("user", "x")]).unwrap(), "ok");
    }

    #[test]
    fn a_syntax_error_is_refused_at_load() {
        let e = ChatTemplate::new("{% for m in messages %}", "", "").unwrap_err();
        assert!(e.to_string().contains("chat template"), "{e}");
    }

    #[test]
    fn exactly_one_bos() {
        assert_eq!(one_bos(vec![5, 6], Some(1)), vec![1, 5, 6]);
        assert_eq!(one_bos(vec![1, 5], Some(1)), vec![1, 5]);
        assert_eq!(one_bos(vec![1, 1, 1, 5], Some(1)), vec![1, 5]);
        assert_eq!(one_bos(vec![5], None), vec![5]);
    }
}
