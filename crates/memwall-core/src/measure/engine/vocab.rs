//! A model's vocabulary: text to tokens and back, the special tokens, the chat
//! template, and [`Utf8Stream`], which turns a stream of token bytes into text.
//!
//! Every [`super::Engine`] is a [`Vocab`] (its model's tokenizer); code that only
//! turns text into tokens (the server's request handlers, a vocab-only load of a
//! GGUF) takes a `Vocab` and needs no engine.

use super::{EngineError, TokenId};
use serde::{Deserialize, Serialize};

/// A chat message for template application.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
}

/// One entry of a tokenizer's vocabulary: what a draft model must share with its
/// target, id for id ([`Vocab::vocabulary`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenEntry {
    /// The token's text as the vocabulary stores it (llama.cpp's
    /// `llama_vocab_get_text`; GGUF `tokenizer.ggml.tokens`), raw bytes.
    pub text: Vec<u8>,
    /// The bytes it decodes to, special tokens spelled out (`<|im_end|>`).
    pub piece: Vec<u8>,
    /// llama.cpp's token attribute bits (`LLAMA_TOKEN_ATTR_*`: normal, control,
    /// user-defined, byte, unused, …), the special-token flags.
    pub attr: u32,
    /// Ends generation ([`Vocab::is_eog`]).
    pub eog: bool,
}

/// A model's tokenizer: text ↔ token ids, the special tokens, the chat template.
pub trait Vocab {
    /// Tokenizes `text`; `add_special` adds BOS where the model wants it; special
    /// tokens written in the text (`<|im_start|>`) are parsed.
    ///
    /// # Errors
    /// [`EngineError::Tokenize`].
    fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, EngineError>;
    /// The bytes of one token (may be a partial UTF-8 sequence: [`Utf8Stream`]
    /// joins them).
    fn token_bytes(&self, token: TokenId) -> Vec<u8>;
    /// End-of-generation token?
    fn is_eog(&self, token: TokenId) -> bool;
    /// BOS token when the model adds one.
    fn bos(&self) -> Option<TokenId>;
    /// Applies llama.cpp's built-in chat format `name` (`chatml`, `llama3`, …) to
    /// `messages`, for a model whose file has no template.
    ///
    /// # Errors
    /// [`EngineError::Unsupported`] by default; [`EngineError::Tokenize`] when the
    /// format is unknown.
    fn apply_builtin_template(
        &self,
        _name: &str,
        _messages: &[ChatMessage],
    ) -> Result<String, EngineError> {
        Err(EngineError::Unsupported("built-in chat formats"))
    }
    /// The tokenizer's whole vocabulary, in id order (the tokenizer's own size, which
    /// may be less than the logit width, [`super::Engine::n_vocab`]).
    ///
    /// # Errors
    /// [`EngineError::Unsupported`] by default: an engine that cannot list its
    /// vocabulary cannot be paired with a draft model.
    fn vocabulary(&self) -> Result<Vec<TokenEntry>, EngineError> {
        Err(EngineError::Unsupported("listing the vocabulary"))
    }
    /// `text`'s tokens with nothing added and special-token text read as plain
    /// characters (llama.cpp's `parse_special = false`): the prompt path
    /// ([`crate::measure::prompt`]) tokenizes the text between special tokens so.
    ///
    /// # Errors
    /// [`EngineError::Unsupported`] by default; [`EngineError::Tokenize`].
    fn tokenize_plain(&self, _text: &str) -> Result<Vec<TokenId>, EngineError> {
        Err(EngineError::Unsupported(
            "tokenizing text with special tokens read as text",
        ))
    }
    /// What the prompt path needs of this vocabulary, read once per model: the
    /// GGUF's chat template, the BOS and EOS texts templates see, the BOS a prompt
    /// starts with, the special tokens ([`crate::measure::prompt::PromptVocab`]).
    ///
    /// # Errors
    /// [`EngineError::Unsupported`] by default.
    fn prompt_vocab(&self) -> Result<crate::measure::prompt::PromptVocab, EngineError> {
        Err(EngineError::Unsupported("chat prompts"))
    }
    /// The model's chat format, compiled ([`Vocab::prompt_vocab`]): how every command
    /// turns chat messages into this model's tokens
    /// ([`crate::measure::prompt::ChatFormat::chat`]).
    ///
    /// # Errors
    /// [`Vocab::prompt_vocab`]'s error, or the GGUF's template failing to compile.
    fn chat_format(
        &self,
    ) -> Result<crate::measure::prompt::ChatFormat, crate::measure::prompt::PromptError> {
        Ok(crate::measure::prompt::ChatFormat::new(
            self.prompt_vocab()?,
        )?)
    }
}

/// Every vocabulary (every engine) is the prompt path's plain tokenizer
/// ([`Vocab::tokenize_plain`]).
impl<V: Vocab + ?Sized> crate::measure::prompt::PlainTokenizer for V {
    fn tokenize_plain(&self, text: &str) -> Result<Vec<TokenId>, EngineError> {
        Vocab::tokenize_plain(self, text)
    }
}

/// Implements [`Vocab`] for a pointer type to a vocabulary (or engine) by forwarding
/// every method, the provided ones included.
macro_rules! forward_vocab {
    ($($ptr:tt)*) => {
        impl<V: Vocab + ?Sized> Vocab for $($ptr)* {
            fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, EngineError> {
                (**self).tokenize(text, add_special)
            }
            fn token_bytes(&self, token: TokenId) -> Vec<u8> {
                (**self).token_bytes(token)
            }
            fn is_eog(&self, token: TokenId) -> bool {
                (**self).is_eog(token)
            }
            fn bos(&self) -> Option<TokenId> {
                (**self).bos()
            }
            fn apply_builtin_template(
                &self,
                name: &str,
                messages: &[ChatMessage],
            ) -> Result<String, EngineError> {
                (**self).apply_builtin_template(name, messages)
            }
            fn vocabulary(&self) -> Result<Vec<TokenEntry>, EngineError> {
                (**self).vocabulary()
            }
            fn tokenize_plain(&self, text: &str) -> Result<Vec<TokenId>, EngineError> {
                (**self).tokenize_plain(text)
            }
            fn prompt_vocab(&self) -> Result<crate::measure::prompt::PromptVocab, EngineError> {
                (**self).prompt_vocab()
            }
        }
    };
}
forward_vocab!(Box<V>);
forward_vocab!(&mut V);

/// Turns a stream of token bytes (tokens may split UTF-8 characters) into complete
/// UTF-8 text; invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Adds `bytes`; returns the text that is now complete.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let ok = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..ok]).expect("valid prefix"));
                    match e.error_len() {
                        // An incomplete character at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..ok);
                            return out;
                        }
                        Some(n) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..ok + n);
                        }
                    }
                }
            }
        }
    }
    /// Whatever is left at the end (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_stream_holds_split_characters() {
        let mut u = Utf8Stream::default();
        assert_eq!(u.push(b"a\xE2\x82"), "a");
        assert_eq!(u.push(b"\xAC b"), "\u{20AC} b");
        assert_eq!(u.push(b"\xFFx"), "\u{FFFD}x");
        assert_eq!(u.push(b"\xC3"), "");
        assert_eq!(u.finish(), "\u{FFFD}");
    }

    /// A vocabulary that lists nothing and knows no built-in formats refuses both
    /// by default, naming what it cannot do.
    #[test]
    fn a_vocabulary_without_a_table_refuses_by_name() {
        struct Bytes;
        impl Vocab for Bytes {
            fn tokenize(&self, text: &str, _: bool) -> Result<Vec<TokenId>, EngineError> {
                Ok(text.bytes().map(TokenId::from).collect())
            }
            fn token_bytes(&self, token: TokenId) -> Vec<u8> {
                vec![token as u8]
            }
            fn is_eog(&self, _: TokenId) -> bool {
                false
            }
            fn bos(&self) -> Option<TokenId> {
                None
            }
        }
        let boxed: Box<dyn Vocab> = Box::new(Bytes);
        assert_eq!(boxed.tokenize("hi", true).unwrap(), [104, 105]);
        assert_eq!(
            boxed.vocabulary().unwrap_err().to_string(),
            "not supported by this engine: listing the vocabulary"
        );
        assert_eq!(
            boxed
                .apply_builtin_template("chatml", &[])
                .unwrap_err()
                .to_string(),
            "not supported by this engine: built-in chat formats"
        );
    }
}
