//! One prompt path for every command: chat messages become tokens the
//! same way in `memwall serve` (`/v1/chat/completions`), the app's chat, `memwall
//! spec` (prompt sets, gates, benches) and the task evaluations, so a gate, a chat
//! figure, a task score and a served request of the same messages ran the same prompt.
//!
//! [`ChatFormat::chat`]:
//! 1. renders the messages with the GGUF's own Jinja template
//!    (`tokenizer.chat_template`, [`ChatTemplate`], minijinja) with
//!    `add_generation_prompt = true`. A file without a template gets
//!    [`FALLBACK_TEMPLATE`] (ChatML, what llama-server uses then), and
//!    [`ChatFormat::fallback_note`] is the warning a run stores in its notes;
//! 2. finds which bytes of the rendered text came from message contents: the messages
//!    are rendered a second time with each content's non-blank core wrapped in two
//!    private-use marker characters, and that render, markers removed, must equal the
//!    first;
//! 3. splits the text at special-token texts the way llama.cpp's tokenizer does
//!    (`tokenizer_st_partition`: control, user-defined and unknown tokens, longest text
//!    first, with their lstrip/rstrip flags), except that a control or unknown token's
//!    text inside a message's content stays text: a user who writes `<|im_end|>` gets
//!    the tokens of those characters, not the end of their turn (user-defined tokens
//!    are matched everywhere, as llama.cpp matches them even with special-token
//!    parsing off);
//! 4. tokenizes the text between special tokens with special-token parsing off
//!    ([`PlainTokenizer`]);
//! 5. puts exactly one BOS in front when the model wants one ([`one_bos`]): none
//!    added when the template wrote it, repeats collapsed.
//!
//! Where no message content holds a special token's text, the tokens are exactly
//! llama.cpp's `tokenize(text, add_special = false, parse_special = true)` of the
//! rendered text with one BOS in front: what llama-server feeds its model.
//!
//! [`ChatFormat::text`] is steps 3–5 on text that is all the caller's own
//! (`/v1/completions` prompts, raw spec prompts): special-token text is parsed, and a
//! prompt that starts with the BOS's text gets one BOS, not two.

pub mod template;

use crate::measure::engine::{ChatMessage, EngineError, TokenEntry, TokenId};
pub use template::{CHAT_TEMPLATE_KEY, ChatTemplate, TemplateError, one_bos};

/// llama.cpp's `LLAMA_TOKEN_ATTR_UNKNOWN`.
pub const ATTR_UNKNOWN: u32 = 1 << 0;
/// llama.cpp's `LLAMA_TOKEN_ATTR_CONTROL`.
pub const ATTR_CONTROL: u32 = 1 << 3;
/// llama.cpp's `LLAMA_TOKEN_ATTR_USER_DEFINED`.
pub const ATTR_USER_DEFINED: u32 = 1 << 4;
/// llama.cpp's `LLAMA_TOKEN_ATTR_LSTRIP`: whitespace before the token is dropped.
pub const ATTR_LSTRIP: u32 = 1 << 7;
/// llama.cpp's `LLAMA_TOKEN_ATTR_RSTRIP`: whitespace after the token is dropped.
pub const ATTR_RSTRIP: u32 = 1 << 8;

/// The chat format of a GGUF without `tokenizer.chat_template`: ChatML
/// (`<|im_start|>{role}\n{content}<|im_end|>\n` per message, then
/// `<|im_start|>assistant\n`), llama-server's default and what llama.cpp's built-in
/// `chatml` writes, rendered by memwall like any template.
pub const FALLBACK_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The warning shown at start and stored in a run's notes when `model` (a path or
/// name) has no `tokenizer.chat_template`, so its chat prompts used
/// [`FALLBACK_TEMPLATE`].
pub fn fallback_note(model: &str) -> String {
    format!(
        "{model} has no tokenizer.chat_template: chat prompts used memwall's fallback ChatML template (<|im_start|>role\\ncontent<|im_end|>)"
    )
}

/// Where a model's chat format comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateSource {
    /// The GGUF's `tokenizer.chat_template`, run with minijinja.
    Gguf,
    /// [`FALLBACK_TEMPLATE`]: the file has no template.
    Fallback,
}

impl TemplateSource {
    /// A short tag for logs and `system_fingerprint`: `jinja` or `fallback-chatml`.
    pub fn tag(self) -> &'static str {
        match self {
            TemplateSource::Gguf => "jinja",
            TemplateSource::Fallback => "fallback-chatml",
        }
    }
}

/// A token that the tokenizer finds in text before anything else: llama.cpp's
/// special-token cache (control, user-defined and unknown tokens).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialToken {
    pub id: TokenId,
    /// Its text as the vocabulary stores it (`<|im_start|>`).
    pub text: String,
    /// llama.cpp's attribute bits (`ATTR_*`).
    pub attr: u32,
}

impl SpecialToken {
    /// The special tokens of a vocabulary table: the entries llama.cpp matches in text
    /// before tokenizing it (control, user-defined or unknown). An entry whose text is
    /// empty or not UTF-8 cannot be written in a prompt and is left out.
    pub fn of_table(table: &[TokenEntry]) -> Vec<SpecialToken> {
        table
            .iter()
            .enumerate()
            .filter(|(_, e)| e.attr & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN) != 0)
            .filter_map(|(i, e)| {
                let text = String::from_utf8(e.text.clone()).ok()?;
                (!text.is_empty()).then_some(SpecialToken {
                    id: i as TokenId,
                    text,
                    attr: e.attr,
                })
            })
            .collect()
    }
}

/// What the prompt path needs of a model's vocabulary, read once per model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptVocab {
    /// The GGUF's `tokenizer.chat_template`; `None` (or blank) when it has none.
    pub template: Option<String>,
    /// The BOS token's text, as templates see it (`bos_token`).
    pub bos_text: String,
    /// The EOS token's text, as templates see it (`eos_token`).
    pub eos_text: String,
    /// The BOS a prompt starts with, when the model wants one.
    pub bos: Option<TokenId>,
    /// The vocabulary's special tokens ([`SpecialToken::of_table`]), any order.
    pub specials: Vec<SpecialToken>,
}

/// Text to tokens as the prompt path needs it: no BOS or EOS added, special-token
/// text read as plain characters (llama.cpp's `parse_special = false`).
pub trait PlainTokenizer {
    /// `text`'s tokens, nothing added, special-token text not parsed.
    ///
    /// # Errors
    /// [`EngineError::Tokenize`].
    fn tokenize_plain(&self, text: &str) -> Result<Vec<TokenId>, EngineError>;
}

/// Why messages could not become a prompt.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// The template failed to compile or raised.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The tokenizer failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A content holds a control token's text and the template rewrites contents, so
    /// where they sit in the prompt cannot be told.
    #[error(
        "messages[{index}].content holds the special-token text {token:?}, and this model's chat template rewrites message contents, so memwall cannot tell that text from the template's own special tokens; remove it from the message"
    )]
    Inseparable {
        /// Index of the message.
        index: usize,
        /// The special token's text.
        token: String,
    },
}

impl From<PromptError> for EngineError {
    fn from(e: PromptError) -> EngineError {
        match e {
            PromptError::Engine(e) => e,
            other => EngineError::Tokenize(other.to_string()),
        }
    }
}

/// A chat prompt: the rendered text and its tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatPrompt {
    /// The template's output (what `-v` logs and `spec prompts` shows).
    pub text: String,
    /// The tokens the model is fed, one BOS included where the model wants one.
    pub tokens: Vec<TokenId>,
}

/// Marks the start of a message content in the marked render (private use).
const OPEN: char = '\u{E000}';
/// Marks its end.
const CLOSE: char = '\u{E001}';

/// A model's chat format: its template (or the fallback), special tokens and BOS.
#[derive(Debug)]
pub struct ChatFormat {
    template: ChatTemplate,
    source: TemplateSource,
    /// Longest text first (llama.cpp's order), then by id.
    specials: Vec<SpecialToken>,
    bos: Option<TokenId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frag {
    /// Bytes `start..end` of the text.
    Text(usize, usize),
    Token(TokenId),
}

impl ChatFormat {
    /// Compiles `v`'s template ([`FALLBACK_TEMPLATE`] when it has none).
    ///
    /// # Errors
    /// [`TemplateError`] when the GGUF's template does not compile.
    pub fn new(v: PromptVocab) -> Result<ChatFormat, TemplateError> {
        let (src, source) = match v.template.as_deref().filter(|t| !t.trim().is_empty()) {
            Some(t) => (t, TemplateSource::Gguf),
            None => (FALLBACK_TEMPLATE, TemplateSource::Fallback),
        };
        let template = ChatTemplate::new(src, &v.bos_text, &v.eos_text)?;
        let mut specials = v.specials;
        specials.sort_by(|a, b| b.text.len().cmp(&a.text.len()).then(a.id.cmp(&b.id)));
        Ok(ChatFormat {
            template,
            source,
            specials,
            bos: v.bos,
        })
    }

    /// Where the chat format comes from.
    pub fn source(&self) -> TemplateSource {
        self.source
    }

    /// The BOS a prompt starts with, when the model wants one.
    pub fn bos(&self) -> Option<TokenId> {
        self.bos
    }

    /// The warning a run stores in its notes when `model` (a path or name) has no
    /// template ([`fallback_note`]); `None` when it has one.
    pub fn fallback_note(&self, model: &str) -> Option<String> {
        (self.source == TemplateSource::Fallback).then(|| fallback_note(model))
    }

    /// `messages` as the model's prompt: rendered text and tokens (see the module
    /// documentation).
    ///
    /// # Errors
    /// [`PromptError::Template`] with the template's message when it raises,
    /// [`PromptError::Inseparable`], or the tokenizer's error.
    pub fn chat<T: PlainTokenizer + ?Sized>(
        &self,
        tok: &T,
        messages: &[ChatMessage],
    ) -> Result<ChatPrompt, PromptError> {
        let text = self.template.render(messages)?;
        let content = self.content_bytes(&text, messages)?;
        let tokens = self.tokenize(tok, &text, &content)?;
        Ok(ChatPrompt { text, tokens })
    }

    /// Text that is all the caller's own (a `/v1/completions` prompt, a raw spec
    /// prompt) as tokens: special-token text parsed, exactly one BOS where the model
    /// wants one.
    ///
    /// # Errors
    /// The tokenizer's error.
    pub fn text<T: PlainTokenizer + ?Sized>(
        &self,
        tok: &T,
        text: &str,
    ) -> Result<Vec<TokenId>, PromptError> {
        self.tokenize(tok, text, &vec![false; text.len()])
    }

    /// Which bytes of `text` (the render of `messages`) came from message contents.
    fn content_bytes(
        &self,
        text: &str,
        messages: &[ChatMessage],
    ) -> Result<Vec<bool>, PromptError> {
        if let Some(mask) = self.marked(text, messages) {
            return Ok(mask);
        }
        // The template rewrote the marked contents: that matters only when a content
        // holds text that would otherwise be read as a control token.
        for (index, m) in messages.iter().enumerate() {
            if let Some(s) = self.specials.iter().find(|s| {
                s.attr & (ATTR_CONTROL | ATTR_UNKNOWN) != 0 && m.content.contains(&s.text)
            }) {
                return Err(PromptError::Inseparable {
                    index,
                    token: s.text.clone(),
                });
            }
        }
        Ok(vec![false; text.len()])
    }

    /// Renders `messages` with each content's non-blank core between [`OPEN`] and
    /// [`CLOSE`]; the content mask when that render, markers removed, is `text`.
    fn marked(&self, text: &str, messages: &[ChatMessage]) -> Option<Vec<bool>> {
        if messages.iter().any(|m| m.content.contains([OPEN, CLOSE])) {
            return None;
        }
        let marked: Vec<ChatMessage> = messages
            .iter()
            .map(|m| {
                let c = &m.content;
                let core = c.trim();
                if core.is_empty() {
                    return m.clone();
                }
                let start = c.len() - c.trim_start().len();
                let end = start + core.len();
                ChatMessage {
                    role: m.role.clone(),
                    content: format!("{}{OPEN}{core}{CLOSE}{}", &c[..start], &c[end..]),
                }
            })
            .collect();
        let r = self.template.render(&marked).ok()?;
        let mut mask = Vec::with_capacity(text.len());
        let mut stripped = String::with_capacity(text.len());
        let mut depth = 0u32;
        for ch in r.chars() {
            match ch {
                OPEN => depth += 1,
                CLOSE => depth = depth.checked_sub(1)?,
                _ => {
                    stripped.push(ch);
                    mask.extend(std::iter::repeat_n(depth > 0, ch.len_utf8()));
                }
            }
        }
        (depth == 0 && stripped == text).then_some(mask)
    }

    /// Steps 3–5: special tokens, plain text between them, one BOS.
    fn tokenize<T: PlainTokenizer + ?Sized>(
        &self,
        tok: &T,
        text: &str,
        content: &[bool],
    ) -> Result<Vec<TokenId>, PromptError> {
        let mut out = Vec::new();
        for f in self.partition(text, content) {
            match f {
                Frag::Token(id) => out.push(id),
                Frag::Text(a, b) => out.extend(tok.tokenize_plain(&text[a..b])?),
            }
        }
        Ok(one_bos(out, self.bos))
    }

    /// llama.cpp's `tokenizer_st_partition` with special-token parsing on, except that
    /// a control or unknown token is not matched where any of its bytes is `content`.
    fn partition(&self, text: &str, content: &[bool]) -> Vec<Frag> {
        if text.is_empty() {
            return Vec::new();
        }
        let bytes = text.as_bytes();
        let mut frags = vec![Frag::Text(0, text.len())];
        for sp in &self.specials {
            if !text.contains(sp.text.as_str()) {
                continue;
            }
            let anywhere = sp.attr & (ATTR_CONTROL | ATTR_UNKNOWN) == 0;
            let n = sp.text.len();
            let allowed = |m: usize| anywhere || !content[m..m + n].contains(&true);
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Frag::Text(mut base, end) = f else {
                    next.push(f);
                    continue;
                };
                loop {
                    let Some(m) = find_from(text, base, end, &sp.text, allowed) else {
                        next.push(Frag::Text(base, end));
                        break;
                    };
                    let mut left = m;
                    if sp.attr & ATTR_LSTRIP != 0 {
                        while left > base && is_space(bytes[left - 1]) {
                            left -= 1;
                        }
                    }
                    if left > base {
                        next.push(Frag::Text(base, left));
                    }
                    next.push(Frag::Token(sp.id));
                    let mut right = m + n;
                    if sp.attr & ATTR_RSTRIP != 0 {
                        while right < end && is_space(bytes[right]) {
                            right += 1;
                        }
                    }
                    if right >= end {
                        break;
                    }
                    base = right;
                }
            }
            frags = next;
        }
        frags
    }
}

/// The first occurrence of `needle` in `text[from..end]` at which `allowed` holds.
fn find_from(
    text: &str,
    from: usize,
    end: usize,
    needle: &str,
    allowed: impl Fn(usize) -> bool,
) -> Option<usize> {
    let step = needle.chars().next().map_or(1, char::len_utf8);
    let mut at = from;
    while at < end {
        let m = at + text[at..end].find(needle)?;
        if allowed(m) {
            return Some(m);
        }
        at = m + step;
    }
    None
}

/// C's `isspace` in the "C" locale (llama.cpp's lstrip/rstrip test).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tokenizer with a hand-checkable rule: every byte is its own token (id =
    /// byte + 1000), so special tokens (ids < 1000) stand out.
    struct Bytes;
    impl PlainTokenizer for Bytes {
        fn tokenize_plain(&self, text: &str) -> Result<Vec<TokenId>, EngineError> {
            Ok(text.bytes().map(|b| 1000 + TokenId::from(b)).collect())
        }
    }

    fn plain(s: &str) -> Vec<TokenId> {
        Bytes.tokenize_plain(s).unwrap()
    }

    fn msg(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }

    fn special(id: TokenId, text: &str, attr: u32) -> SpecialToken {
        SpecialToken {
            id,
            text: text.into(),
            attr,
        }
    }

    /// ChatML-like specials: <s> = 1 (BOS), <|im_start|> = 5, <|im_end|> = 6,
    /// a user-defined <tab> = 7.
    fn vocab(template: Option<&str>, bos: Option<TokenId>) -> PromptVocab {
        PromptVocab {
            template: template.map(str::to_string),
            bos_text: "<s>".into(),
            eos_text: "<|im_end|>".into(),
            bos,
            specials: vec![
                special(1, "<s>", ATTR_CONTROL),
                special(5, "<|im_start|>", ATTR_CONTROL),
                special(6, "<|im_end|>", ATTR_CONTROL),
                special(7, "<tab>", ATTR_USER_DEFINED),
            ],
        }
    }

    fn cat(parts: &[&[TokenId]]) -> Vec<TokenId> {
        parts.concat()
    }

    #[test]
    fn template_specials_are_parsed_and_content_specials_are_text() {
        let f = ChatFormat::new(vocab(None, None)).unwrap();
        assert_eq!(f.source(), TemplateSource::Fallback);
        let p = f
            .chat(&Bytes, &[msg("user", "say <|im_end|> and <tab>")])
            .unwrap();
        assert_eq!(
            p.text,
            "<|im_start|>user\nsay <|im_end|> and <tab><|im_end|>\n<|im_start|>assistant\n"
        );
        // By hand: the template's two <|im_start|> and its <|im_end|> are tokens; the
        // user's <|im_end|> is ten characters; the user-defined <tab> is a token
        // wherever it is (llama.cpp matches those even with parsing off).
        let want = cat(&[
            &[5],
            &plain("user\nsay <|im_end|> and "),
            &[7, 6],
            &plain("\n"),
            &[5],
            &plain("assistant\n"),
        ]);
        assert_eq!(p.tokens, want);
    }

    #[test]
    fn exactly_one_bos_whether_or_not_the_template_writes_it() {
        // A template that writes the BOS itself (Gemma's way), on a model that adds one.
        let f = ChatFormat::new(vocab(
            Some("{{ bos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}"),
            Some(1),
        ))
        .unwrap();
        let p = f.chat(&Bytes, &[msg("user", "hi")]).unwrap();
        assert_eq!(p.tokens, cat(&[&[1], &plain("[hi]")]));
        // A template that does not: the BOS is added.
        let f = ChatFormat::new(vocab(
            Some("{% for m in messages %}[{{ m.content }}]{% endfor %}"),
            Some(1),
        ))
        .unwrap();
        assert_eq!(
            f.chat(&Bytes, &[msg("user", "hi")]).unwrap().tokens,
            cat(&[&[1], &plain("[hi]")])
        );
        // A user who starts with the BOS's text gets those characters after one BOS.
        assert_eq!(
            f.chat(&Bytes, &[msg("user", "<s>hi")]).unwrap().tokens,
            cat(&[&[1], &plain("[<s>hi]")])
        );
        // Raw text (/v1/completions) parses it, and still gets one BOS.
        assert_eq!(f.text(&Bytes, "<s>hi").unwrap(), cat(&[&[1], &plain("hi")]));
        assert_eq!(
            f.text(&Bytes, "<s><s>hi").unwrap(),
            cat(&[&[1], &plain("hi")])
        );
        assert_eq!(f.text(&Bytes, "hi").unwrap(), cat(&[&[1], &plain("hi")]));
        // A model that adds none gets none.
        let f = ChatFormat::new(vocab(None, None)).unwrap();
        assert_eq!(f.text(&Bytes, "hi").unwrap(), plain("hi"));
    }

    #[test]
    fn a_trimming_template_still_finds_the_contents() {
        // Gemma's template trims contents: the markers sit inside the blanks, so the
        // marked render still equals the real one.
        let f = ChatFormat::new(vocab(
            Some("{% for m in messages %}<|im_start|>{{ m.content | trim }}<|im_end|>{% endfor %}"),
            None,
        ))
        .unwrap();
        let p = f.chat(&Bytes, &[msg("user", "  a<|im_end|>b \n")]).unwrap();
        assert_eq!(p.text, "<|im_start|>a<|im_end|>b<|im_end|>");
        assert_eq!(p.tokens, cat(&[&[5], &plain("a<|im_end|>b"), &[6]]));
    }

    #[test]
    fn a_template_that_rewrites_contents_refuses_only_special_text() {
        // Truncating contents hides where they end: fine without special-token text
        // (nothing to tell apart), refused with it.
        let f = ChatFormat::new(vocab(
            Some("{% for m in messages %}<|im_start|>{{ m.content[:12] }}<|im_end|>{% endfor %}"),
            None,
        ))
        .unwrap();
        let p = f.chat(&Bytes, &[msg("user", "hello")]).unwrap();
        assert_eq!(p.tokens, cat(&[&[5], &plain("hello"), &[6]]));
        let e = f
            .chat(&Bytes, &[msg("system", "x"), msg("user", "a<|im_start|>b")])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "messages[1].content holds the special-token text \"<|im_start|>\", and this model's chat template rewrites message contents, so memwall cannot tell that text from the template's own special tokens; remove it from the message"
        );
    }

    #[test]
    fn longest_special_first_and_strip_flags_as_llama_cpp() {
        let v = PromptVocab {
            specials: vec![
                special(2, "<a>", ATTR_CONTROL),
                special(3, "<a><b>", ATTR_CONTROL),
                special(4, "<L>", ATTR_CONTROL | ATTR_LSTRIP),
                special(8, "<R>", ATTR_CONTROL | ATTR_RSTRIP),
            ],
            ..Default::default()
        };
        let f = ChatFormat::new(v).unwrap();
        // "<a><b>" wins over "<a>" where both match; the strip flags eat the blanks
        // on their side only.
        assert_eq!(
            f.text(&Bytes, "x<a><b>y<a> z  <L>  <R> \tw").unwrap(),
            cat(&[
                &plain("x"),
                &[3],
                &plain("y"),
                &[2],
                &plain(" z"),
                &[4],
                &plain("  "),
                &[8],
                &plain("w"),
            ])
        );
        assert_eq!(f.text(&Bytes, "").unwrap(), Vec::<TokenId>::new());
    }

    #[test]
    fn the_special_table_is_control_user_defined_and_unknown() {
        let e = |text: &str, attr: u32| TokenEntry {
            text: text.as_bytes().to_vec(),
            piece: vec![],
            attr,
            eog: false,
        };
        let table = vec![
            e("<unk>", ATTR_UNKNOWN),
            e("a", 1 << 2),
            e("<|im_end|>", ATTR_CONTROL),
            e("<tab>", ATTR_USER_DEFINED),
            e("", ATTR_CONTROL),
            e("<unused0>", 1 << 1),
        ];
        let ids: Vec<TokenId> = SpecialToken::of_table(&table)
            .iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(ids, [0, 2, 3]);
    }

    #[test]
    fn the_fallback_is_chatml_and_says_so() {
        let f = ChatFormat::new(vocab(Some("  \n"), None)).unwrap();
        assert_eq!(f.source(), TemplateSource::Fallback);
        assert_eq!(f.source().tag(), "fallback-chatml");
        let p = f
            .chat(
                &Bytes,
                &[
                    msg("system", "S"),
                    msg("user", "U"),
                    msg("assistant", "A"),
                    msg("user", "V"),
                ],
            )
            .unwrap();
        assert_eq!(
            p.text,
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nV<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(
            f.fallback_note("m.gguf").unwrap(),
            "m.gguf has no tokenizer.chat_template: chat prompts used memwall's fallback ChatML template (<|im_start|>role\\ncontent<|im_end|>)"
        );
        let g = ChatFormat::new(vocab(Some("{{ messages[0].content }}"), None)).unwrap();
        assert_eq!(g.source(), TemplateSource::Gguf);
        assert_eq!(g.fallback_note("m.gguf"), None);
    }

    #[test]
    fn a_raising_template_is_a_template_error() {
        let f = ChatFormat::new(vocab(
            Some("{{ raise_exception('System role not supported') }}"),
            None,
        ))
        .unwrap();
        let e = f.chat(&Bytes, &[msg("system", "x")]).unwrap_err();
        assert_eq!(e.to_string(), "chat template: System role not supported");
        assert_eq!(
            EngineError::from(e).to_string(),
            "tokenizer: chat template: System role not supported"
        );
    }
}
