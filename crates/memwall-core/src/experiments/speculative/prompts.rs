//! The frozen prompt set of the gate and the bench (`prompts/spec.jsonl`, built into
//! the binary; another file can be given).
//!
//! Format: JSON Lines, one prompt per line: `id` (unique), `category` (`json`,
//! `code`, `prose`), `format` (`raw` with `text`, or `chat` with `messages`,
//! rendered with the target model's own chat template). The set is identified by
//! the sha256 of [`PROMPT_PATH`], a newline and the file's bytes: the file and the
//! way its prompts become tokens, so that a gate never unlocks a bench whose prompts
//! were tokenized another way.

use super::SpecError;
use crate::measure::engine::{ChatMessage, Engine, EngineError, TokenId, Vocab};
use crate::measure::prompt::ChatFormat;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// How this memwall turns a set's prompts into tokens, hashed into the set's identity
/// ([`PromptSet::sha256`], stored as `prompt_set_sha256`, which gates and the rows they
/// unlock are keyed by). Version 2: chat prompts through
/// [`crate::measure::prompt::ChatFormat`] (the GGUF's Jinja template run by minijinja,
/// exactly one BOS, special tokens parsed in the template's text only), raw prompts
/// with exactly one BOS. Version 1 (the bare file sha256 that older rows hold) used
/// llama.cpp's built-in template matcher and `tokenize(add_bos = true)`, which drops
/// Qwen2.5's default system message: gates stored then unlock nothing now. Change
/// this string whenever the prompt path changes what tokens a prompt gets.
pub const PROMPT_PATH: &str = "memwall prompt path 2";

/// The built-in prompt set (the repository's `prompts/spec.jsonl`).
pub const BUILTIN: &str = include_str!("../../../../../prompts/spec.jsonl");

/// Prompt categories (the bench reports acceptance per category).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ts_rs::TS,
)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// JSON documents and JSON-producing requests.
    Json,
    /// Source code.
    Code,
    /// Natural-language text.
    Prose,
}

impl Category {
    /// All categories, in report order.
    pub const ALL: [Category; 3] = [Category::Json, Category::Code, Category::Prose];
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Category::Json => "json",
            Category::Code => "code",
            Category::Prose => "prose",
        }
    }
    /// Parses a name.
    pub fn parse(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// How a prompt becomes text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Tokenized as is.
    Raw,
    /// Messages rendered with the model's chat template.
    Chat,
}

impl Format {
    /// `raw` / `chat`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Chat => "chat",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    /// Id of the prompt in the frozen set, unique, e.g. `json-01`.
    pub id: String,
    /// Prompt category: `json`, `code` or `prose`.
    pub category: Category,
    /// Raw or chat.
    pub format: Format,
    /// Text (raw prompts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Messages (chat prompts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<ChatMessage>>,
}

impl Prompt {
    /// The exact text fed to the model (after the chat template for chat prompts).
    ///
    /// # Errors
    /// Template errors.
    pub fn render(&self, e: &dyn Engine) -> Result<String, SpecError> {
        Ok(match self.format {
            Format::Raw => self.text.clone().unwrap_or_default(),
            Format::Chat => {
                e.chat_format()
                    .and_then(|f| f.chat(e, self.messages()))
                    .map_err(EngineError::from)?
                    .text
            }
        })
    }
    /// The prompt's tokens, through the one prompt path every command takes
    /// ([`ChatFormat`]; exactly one BOS where the model wants one).
    ///
    /// # Errors
    /// Template or tokenizer errors.
    pub fn tokens(&self, e: &dyn Engine) -> Result<Vec<TokenId>, SpecError> {
        let f = e.chat_format().map_err(EngineError::from)?;
        self.tokens_with(&f, e)
    }
    /// As [`Prompt::tokens`] with the model's chat format `f` already read (a whole
    /// set is tokenized with one).
    ///
    /// # Errors
    /// Template or tokenizer errors.
    pub fn tokens_with<V: Vocab + ?Sized>(
        &self,
        f: &ChatFormat,
        v: &V,
    ) -> Result<Vec<TokenId>, SpecError> {
        let t = match self.format {
            Format::Raw => f.text(v, self.text.as_deref().unwrap_or_default()),
            Format::Chat => f.chat(v, self.messages()).map(|p| p.tokens),
        };
        Ok(t.map_err(EngineError::from)?)
    }
    fn messages(&self) -> &[ChatMessage] {
        self.messages.as_deref().unwrap_or(&[])
    }
}

/// A loaded prompt set.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptSet {
    /// Where it came from (`builtin:prompts/spec.jsonl` or a path).
    pub source: String,
    /// The set's identity: sha256 (hex) of [`PROMPT_PATH`], `\n` and the file's bytes.
    pub sha256: String,
    /// The prompts, in file order.
    pub prompts: Vec<Prompt>,
}

impl PromptSet {
    /// The built-in set.
    ///
    /// # Errors
    /// Never for the shipped file (a test checks it).
    pub fn builtin() -> Result<PromptSet, SpecError> {
        PromptSet::parse(BUILTIN, "builtin:prompts/spec.jsonl")
    }

    /// Loads a file.
    ///
    /// # Errors
    /// [`SpecError::Prompts`] naming the file (and line) when unreadable or malformed.
    pub fn load(path: &Path) -> Result<PromptSet, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|e| SpecError::Prompts {
            path: path.display().to_string(),
            problem: e.to_string(),
        })?;
        PromptSet::parse(&text, &path.display().to_string())
    }

    /// Parses JSON Lines text; `source` names it in errors.
    ///
    /// # Errors
    /// [`SpecError::Prompts`] with the line number, field and fix.
    pub fn parse(text: &str, source: &str) -> Result<PromptSet, SpecError> {
        let bad = |line: usize, problem: String| SpecError::Prompts {
            path: source.to_string(),
            problem: format!("line {line}: {problem}"),
        };
        let mut prompts: Vec<Prompt> = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let line = i + 1;
            if l.trim().is_empty() {
                continue;
            }
            let p: Prompt = serde_json::from_str(l).map_err(|e| {
                bad(
                    line,
                    format!(
                        "{e} (each line is {{\"id\", \"category\": json|code|prose, \"format\": raw|chat, \"text\" or \"messages\"}})"
                    ),
                )
            })?;
            match p.format {
                Format::Raw if p.text.as_deref().is_none_or(str::is_empty) => {
                    return Err(bad(
                        line,
                        format!("prompt {}: a raw prompt needs a non-empty \"text\"", p.id),
                    ));
                }
                Format::Chat if p.messages.as_ref().is_none_or(Vec::is_empty) => {
                    return Err(bad(
                        line,
                        format!(
                            "prompt {}: a chat prompt needs non-empty \"messages\"",
                            p.id
                        ),
                    ));
                }
                _ => {}
            }
            if prompts.iter().any(|q| q.id == p.id) {
                return Err(bad(
                    line,
                    format!("duplicate id {:?}: ids must be unique", p.id),
                ));
            }
            prompts.push(p);
        }
        if prompts.is_empty() {
            return Err(SpecError::Prompts {
                path: source.to_string(),
                problem: "no prompts".into(),
            });
        }
        Ok(PromptSet {
            source: source.to_string(),
            sha256: crate::util::sha256_bytes(format!("{PROMPT_PATH}\n{text}").as_bytes()),
            prompts,
        })
    }

    /// Prompts of one category, in file order.
    pub fn of(&self, c: Category) -> Vec<&Prompt> {
        self.prompts.iter().filter(|p| p.category == c).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_set_is_frozen_and_complete() {
        let s = PromptSet::builtin().unwrap();
        assert!(
            s.prompts.len() >= 50,
            "the built-in set must hold at least 50 prompts"
        );
        for c in Category::ALL {
            let of = s.of(c);
            assert!(of.len() >= 10, "{c:?}");
            assert!(of.iter().any(|p| p.format == Format::Chat));
            assert!(of.iter().any(|p| p.format == Format::Raw));
        }
        assert_eq!(s.sha256.len(), 64);
    }

    /// The identity covers the prompt path: the same bytes under another path (the
    /// bare file hash older gates hold) are another set.
    #[test]
    fn the_set_identity_is_the_prompt_path_and_the_bytes() {
        let s = PromptSet::builtin().unwrap();
        assert_eq!(
            s.sha256,
            crate::util::sha256_bytes(format!("memwall prompt path 2\n{BUILTIN}").as_bytes())
        );
        assert_ne!(s.sha256, crate::util::sha256_bytes(BUILTIN.as_bytes()));
    }

    #[test]
    fn malformed_sets_name_line_and_field() {
        let e = PromptSet::parse(
            "{\"id\":\"a\",\"category\":\"json\",\"format\":\"raw\"}\n",
            "f.jsonl",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("f.jsonl") && e.contains("line 1") && e.contains("\"text\""),
            "{e}"
        );
        let e = PromptSet::parse(
            "{\"id\":\"a\",\"category\":\"poetry\",\"format\":\"raw\",\"text\":\"x\"}",
            "f",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 1") && e.contains("poetry"), "{e}");
        let two = "{\"id\":\"a\",\"category\":\"json\",\"format\":\"raw\",\"text\":\"x\"}\n";
        let e = PromptSet::parse(&format!("{two}{two}"), "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("duplicate"), "{e}");
        assert!(
            PromptSet::parse("\n", "f")
                .unwrap_err()
                .to_string()
                .contains("no prompts")
        );
    }
}
