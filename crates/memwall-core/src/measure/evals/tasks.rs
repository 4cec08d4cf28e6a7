//! Task accuracy on fixed, seeded subsets, scored with Wilson 95 % intervals.
//!
//! | task | data | method |
//! | --- | --- | --- |
//! | `gsm8k` | GSM8K test, 1,319 items (JSONL) | greedy generation; the final number (after the last `####`, else the last number in the reply) must equal the reference's |
//! | `mmlu` | MMLU, 14,044 lines = 14,042 items + 2 repeated CSV header rows (JSONL) | log-likelihood of the answer letters: the letter whose first token has the highest log-probability right after the assistant's opening |
//! | `arc-easy` | ARC-Easy validation, 570 items (Arrow IPC stream) | as MMLU, with the item's own labels |
//! | `humaneval` | HumanEval, 164 problems (gzip JSONL) | greedy generation, the code block is **executed** against the problem's tests in the isolated [`super::sandbox`]; a pass is the runner's random token printed after `check(...)` returned (not exit status 0); pass@1 |
//!
//! Prompts go through the model's own chat template (from the GGUF) by the one prompt
//! path every command takes ([`crate::measure::prompt::ChatFormat`]); the exact
//! templated prompt and its token count are kept per item ([`ItemResult`]).
//! Subsets are drawn with a seeded ChaCha8 shuffle ([`subset`]) and their item
//! ids stored, so every arm is scored on identical items.

use super::EvalError;
use super::sandbox::{SandboxLimits, run_python};
use crate::measure::engine::{ChatMessage, Engine, EngineError, TokenId, argmax};
use crate::measure::stats::{Interval, wilson_interval};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TaskKind {
    /// GSM8K test.
    Gsm8k,
    Mmlu,
    /// ARC-Easy validation.
    ArcEasy,
    HumanEval,
}

impl TaskKind {
    /// Every task, in table order.
    pub const ALL: [TaskKind; 4] = [
        TaskKind::Gsm8k,
        TaskKind::Mmlu,
        TaskKind::ArcEasy,
        TaskKind::HumanEval,
    ];

    /// Name, equal to its dataset's catalogue name.
    pub fn name(self) -> &'static str {
        match self {
            TaskKind::Gsm8k => "gsm8k",
            TaskKind::Mmlu => "mmlu",
            TaskKind::ArcEasy => "arc-easy",
            TaskKind::HumanEval => "humaneval",
        }
    }

    /// Parses a name.
    ///
    /// # Errors
    /// [`EvalError::Config`] listing the tasks.
    pub fn parse(s: &str) -> Result<TaskKind, EvalError> {
        TaskKind::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                EvalError::Config(format!(
                    "unknown task {s:?}: use gsm8k, mmlu, arc-easy or humaneval"
                ))
            })
    }

    /// Scored by generation (vs letter log-likelihood).
    pub fn generates(self) -> bool {
        matches!(self, TaskKind::Gsm8k | TaskKind::HumanEval)
    }
}

/// One evaluation item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskItem {
    /// Stable id (`gsm8k/test/17`, `mmlu/5000`, ARC's own id, `HumanEval/0`).
    pub id: String,
    /// The content.
    pub body: ItemBody,
}

/// Item content per task family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ItemBody {
    /// A word problem with a numeric answer.
    Math {
        /// The question as the dataset words it.
        question: String,
        /// Reference final number (commas removed).
        answer: String,
    },
    /// Multiple choice.
    Choice {
        /// Subject (MMLU).
        topic: Option<String>,
        /// The question as the dataset words it.
        question: String,
        /// Option labels (`A`…, or ARC's `1`…).
        labels: Vec<String>,
        /// Option texts.
        choices: Vec<String>,
        /// Correct label.
        answer: String,
    },
    /// A function to complete, with its tests.
    Code {
        /// The prompt (signature + docstring).
        prompt: String,
        /// Function name.
        entry_point: String,
        /// `def check(candidate): …`.
        test: String,
    },
}

fn data_err(path: &Path, problem: String) -> EvalError {
    EvalError::Data {
        path: path.display().to_string(),
        problem,
    }
}

fn str_field(
    v: &serde_json::Value,
    f: &str,
    path: &Path,
    line: usize,
) -> Result<String, EvalError> {
    v.get(f)
        .and_then(|x| x.as_str())
        .map(str::to_string)
        .ok_or_else(|| {
            data_err(
                path,
                format!("line {}: field {f:?} missing or not a string", line + 1),
            )
        })
}

fn jsonl(path: &Path, reader: impl BufRead) -> Result<Vec<serde_json::Value>, EvalError> {
    let mut out = Vec::new();
    for (i, l) in reader.lines().enumerate() {
        let l = l.map_err(|e| data_err(path, format!("line {}: {e}", i + 1)))?;
        if l.trim().is_empty() {
            continue;
        }
        out.push(
            serde_json::from_str(&l).map_err(|e| data_err(path, format!("line {}: {e}", i + 1)))?,
        );
    }
    Ok(out)
}

/// The number after the last `####` of a GSM8K reference solution, commas removed.
pub fn gsm8k_reference(answer: &str) -> Option<String> {
    let tail = answer.rsplit_once("####")?.1;
    first_number(tail)
}

fn number_at(s: &[u8], mut i: usize) -> (usize, String) {
    let mut out = String::new();
    if s[i] == b'-' {
        out.push('-');
        i += 1;
    }
    while i < s.len()
        && (s[i].is_ascii_digit()
            || s[i] == b','
            || (s[i] == b'.' && i + 1 < s.len() && s[i + 1].is_ascii_digit()))
    {
        if s[i] != b',' {
            out.push(s[i] as char);
        }
        i += 1;
    }
    (i, out)
}

fn numbers(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts =
            b[i].is_ascii_digit() || (b[i] == b'-' && i + 1 < b.len() && b[i + 1].is_ascii_digit());
        if starts {
            let (j, n) = number_at(b, i);
            if n.chars().any(|c| c.is_ascii_digit()) {
                out.push(n);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

fn first_number(s: &str) -> Option<String> {
    numbers(s).into_iter().next()
}

/// The final number of a model's GSM8K reply: the first number after the last
/// `####`, else the last number anywhere (e.g. in `\boxed{18}`); commas removed.
pub fn gsm8k_extract(reply: &str) -> Option<String> {
    if let Some((_, tail)) = reply.rsplit_once("####")
        && let Some(n) = first_number(tail)
    {
        return Some(n);
    }
    numbers(reply).pop()
}

/// Numeric equality of two extracted numbers (`18` = `18.0` = `18.00`).
pub fn same_number(a: &str, b: &str) -> bool {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => (x - y).abs() <= 1e-6 * x.abs().max(1.0),
        _ => a == b,
    }
}

/// Loads every item of `kind` from its dataset file.
///
/// # Errors
/// [`EvalError::Data`] naming the file, line/row and field.
pub fn load(kind: TaskKind, path: &Path) -> Result<Vec<TaskItem>, EvalError> {
    let open =
        || std::fs::File::open(path).map_err(|e| EvalError::Io(crate::util::with_path(e, path)));
    match kind {
        TaskKind::Gsm8k => {
            let rows = jsonl(path, std::io::BufReader::new(open()?))?;
            rows.iter()
                .enumerate()
                .map(|(i, v)| {
                    let question = str_field(v, "question", path, i)?;
                    let sol = str_field(v, "answer", path, i)?;
                    let answer = gsm8k_reference(&sol).ok_or_else(|| {
                        data_err(path, format!("line {}: answer has no `#### number`", i + 1))
                    })?;
                    Ok(TaskItem {
                        id: format!("gsm8k/test/{i}"),
                        body: ItemBody::Math { question, answer },
                    })
                })
                .collect()
        }
        TaskKind::Mmlu => {
            let rows = jsonl(path, std::io::BufReader::new(open()?))?;
            // The file repeats its CSV header as a row twice (lines 11777 and 12794:
            // question "question", correct_answer "answer"); those are not items.
            let header = |v: &serde_json::Value| {
                v.get("question").and_then(|q| q.as_str()) == Some("question")
                    && v.get("correct_answer").and_then(|q| q.as_str()) == Some("answer")
            };
            rows.iter()
                .enumerate()
                .filter(|(_, v)| !header(v))
                .map(|(i, v)| {
                    let choices = ["answer_a", "answer_b", "answer_c", "answer_d"]
                        .iter()
                        .map(|f| str_field(v, f, path, i))
                        .collect::<Result<Vec<_>, _>>()?;
                    let answer = str_field(v, "correct_answer", path, i)?;
                    if !["A", "B", "C", "D"].contains(&answer.as_str()) {
                        return Err(data_err(
                            path,
                            format!("line {}: correct_answer {answer:?} is not A–D", i + 1),
                        ));
                    }
                    Ok(TaskItem {
                        id: format!("mmlu/{i}"),
                        body: ItemBody::Choice {
                            topic: v.get("topic").and_then(|t| t.as_str()).map(str::to_string),
                            question: str_field(v, "question", path, i)?.trim().to_string(),
                            labels: ["A", "B", "C", "D"].iter().map(|s| s.to_string()).collect(),
                            choices,
                            answer,
                        },
                    })
                })
                .collect()
        }
        TaskKind::ArcEasy => load_arc(path),
        TaskKind::HumanEval => {
            let mut gz = flate2::read::GzDecoder::new(open()?);
            let mut text = String::new();
            gz.read_to_string(&mut text)
                .map_err(|e| data_err(path, format!("not gzip-compressed UTF-8: {e}")))?;
            let rows = jsonl(path, text.as_bytes())?;
            rows.iter()
                .enumerate()
                .map(|(i, v)| {
                    Ok(TaskItem {
                        id: str_field(v, "task_id", path, i)?,
                        body: ItemBody::Code {
                            prompt: str_field(v, "prompt", path, i)?,
                            entry_point: str_field(v, "entry_point", path, i)?,
                            test: str_field(v, "test", path, i)?,
                        },
                    })
                })
                .collect()
        }
    }
}

/// Reads ARC from an Arrow IPC stream with the Hugging Face `datasets` schema
/// `id: string, question: string, choices: struct<text: list<string>, label: list<string>>, answerKey: string`.
fn load_arc(path: &Path) -> Result<Vec<TaskItem>, EvalError> {
    use arrow_array::{Array, ListArray, StringArray, StructArray};
    let f =
        std::fs::File::open(path).map_err(|e| EvalError::Io(crate::util::with_path(e, path)))?;
    let reader = arrow_ipc::reader::StreamReader::try_new(std::io::BufReader::new(f), None)
        .map_err(|e| data_err(path, format!("not an Arrow IPC stream: {e}")))?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| data_err(path, format!("record batch: {e}")))?;
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| data_err(path, format!("column {name:?} missing")))
        };
        let strings = |name: &str| -> Result<StringArray, EvalError> {
            col(name)?
                .as_any()
                .downcast_ref::<StringArray>()
                .cloned()
                .ok_or_else(|| data_err(path, format!("column {name:?} is not utf8")))
        };
        let (ids, qs, keys) = (strings("id")?, strings("question")?, strings("answerKey")?);
        let choices = col("choices")?
            .as_any()
            .downcast_ref::<StructArray>()
            .cloned()
            .ok_or_else(|| data_err(path, "column \"choices\" is not a struct".into()))?;
        let list = |name: &str| -> Result<ListArray, EvalError> {
            choices
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<ListArray>().cloned())
                .ok_or_else(|| data_err(path, format!("choices.{name} missing or not a list")))
        };
        let (texts, labels) = (list("text")?, list("label")?);
        let as_vec = |l: &ListArray, r: usize, name: &str| -> Result<Vec<String>, EvalError> {
            let v = l.value(r);
            let s = v.as_any().downcast_ref::<StringArray>().ok_or_else(|| {
                data_err(path, format!("row {r}: choices.{name} items are not utf8"))
            })?;
            Ok((0..s.len()).map(|i| s.value(i).to_string()).collect())
        };
        for r in 0..batch.num_rows() {
            let (t, l) = (as_vec(&texts, r, "text")?, as_vec(&labels, r, "label")?);
            if t.len() != l.len() || t.len() < 2 {
                return Err(data_err(
                    path,
                    format!("row {r}: {} choices but {} labels", t.len(), l.len()),
                ));
            }
            let answer = keys.value(r).to_string();
            if !l.contains(&answer) {
                return Err(data_err(
                    path,
                    format!("row {r}: answerKey {answer:?} is not one of the labels {l:?}"),
                ));
            }
            out.push(TaskItem {
                id: ids.value(r).to_string(),
                body: ItemBody::Choice {
                    topic: None,
                    question: qs.value(r).to_string(),
                    labels: l,
                    choices: t,
                    answer,
                },
            });
        }
    }
    Ok(out)
}

/// A seeded subset: indices of `n` of `total` items (all when `n ≥ total`),
/// drawn by a ChaCha8 shuffle from `seed`, returned sorted.
pub fn subset(total: usize, n: usize, seed: u64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..total).collect();
    if n >= total {
        return idx;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    idx.shuffle(&mut rng);
    idx.truncate(n);
    idx.sort_unstable();
    idx
}

/// Settings of one task run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskConfig {
    /// Items in the subset.
    pub n_items: usize,
    /// Subset seed.
    pub seed: u64,
    /// Generation budget (generative tasks).
    pub max_new_tokens: u32,
    /// Sandbox limits (HumanEval).
    pub sandbox: SandboxLimits,
}

/// The outcome of one item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemResult {
    /// Item id.
    pub id: String,
    /// The exact prompt after the chat template.
    pub prompt: String,
    /// Its token count (what the model was fed).
    pub n_prompt_tokens: u32,
    /// Generated text (generative tasks) or the letter log-probabilities.
    pub output: String,
    /// Tokens generated (0 for log-likelihood tasks).
    pub n_gen_tokens: u32,
    /// What was extracted and compared (number, letter, sandbox status).
    pub extracted: String,
    /// The reference.
    pub expected: String,
    /// Scored correct.
    pub correct: bool,
}

/// A finished task run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    pub task: String,
    /// The settings the evaluation ran with.
    pub config: TaskConfig,
    /// Items in the dataset.
    pub n_total: usize,
    /// Items scored.
    pub n: u64,
    pub correct: u64,
    /// correct ÷ n.
    pub accuracy: f64,
    /// Wilson 95 % interval, low.
    pub ci_low: f64,
    /// Wilson 95 % interval, high.
    pub ci_high: f64,
    /// Per-item outcomes, in subset order (empty when read back from a stored
    /// cell, whose items live in `frontier_items`).
    #[serde(default)]
    pub items: Vec<ItemResult>,
    /// Wall time, ns.
    pub elapsed_ns: u64,
}

/// The user message of an item.
pub fn user_message(item: &TaskItem) -> String {
    match &item.body {
        ItemBody::Math { question, .. } => format!(
            "Solve the following math problem step by step. At the end, write the final answer as a number on its own line in the form \"#### <number>\".\n\n{question}"
        ),
        ItemBody::Choice {
            topic,
            question,
            labels,
            choices,
            ..
        } => {
            let mut s = match topic {
                Some(t) => format!("The following is a multiple choice question about {t}.\n\n"),
                None => "The following is a multiple choice question.\n\n".to_string(),
            };
            s.push_str(question);
            s.push('\n');
            for (l, c) in labels.iter().zip(choices) {
                s.push_str(&format!("{l}. {c}\n"));
            }
            s.push_str(&format!(
                "\nAnswer with only the label ({}) of the correct option.",
                labels.join(", ")
            ));
            s
        }
        ItemBody::Code { prompt, .. } => format!(
            "Complete the following Python function. Reply with the complete function, including its signature and any imports it needs, in a single ```python code block.\n\n```python\n{prompt}```"
        ),
    }
}

/// Builds the program executed for a HumanEval item: the reply's first code block
/// (or the whole reply); when it defines the entry point it is used whole, after
/// the prompt's import lines; otherwise it is taken as the body following the
/// prompt. Then the tests and `check(entry_point)`.
pub fn humaneval_program(prompt: &str, entry_point: &str, test: &str, reply: &str) -> String {
    let code = extract_code_block(reply);
    let body = if code.contains(&format!("def {entry_point}")) {
        let imports: String = prompt
            .lines()
            .filter(|l| l.starts_with("import ") || l.starts_with("from "))
            .map(|l| format!("{l}\n"))
            .collect();
        format!("{imports}\n{code}")
    } else {
        format!("{prompt}{code}")
    };
    format!("{body}\n\n{test}\n\ncheck({entry_point})\n")
}

/// The content of the first fenced code block (```` ```python ```` or ```` ``` ````),
/// or the whole text when there is none; an unclosed block runs to the end.
pub fn extract_code_block(reply: &str) -> String {
    let Some(open) = reply.find("```") else {
        return reply.to_string();
    };
    let after = &reply[open + 3..];
    let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
    let body = &after[body_start..];
    match body.find("```") {
        Some(end) => body[..end].to_string(),
        None => body.to_string(),
    }
}

fn stop_generation(kind: TaskKind, text: &str) -> bool {
    match kind {
        TaskKind::Gsm8k => text.rsplit_once("####").is_some_and(|(_, t)| {
            t.contains('\n')
                && t.split('\n')
                    .next()
                    .is_some_and(|l| l.chars().any(|c| c.is_ascii_digit()))
        }),
        TaskKind::HumanEval => text
            .find("```")
            .is_some_and(|i| text[i + 3..].contains("```")),
        _ => false,
    }
}

/// Greedy generation from `prompt` tokens, at most `max_new` tokens, stopping at
/// end-of-generation or when `stop(text)` holds. Returns `(text, tokens generated)`.
///
/// # Errors
/// Engine errors; [`EvalError::Cancelled`].
pub fn generate<E: Engine>(
    e: &mut E,
    prompt: &[TokenId],
    max_new: u32,
    stop: &dyn Fn(&str) -> bool,
    cancel: &AtomicBool,
) -> Result<(String, u32), EvalError> {
    if prompt.len() + max_new as usize > e.n_ctx() as usize {
        return Err(EvalError::Config(format!(
            "prompt of {} tokens + {max_new} new tokens exceeds the context of {}",
            prompt.len(),
            e.n_ctx()
        )));
    }
    e.kv_clear();
    e.prefill(prompt, 0, 0, true)?;
    let mut bytes = Vec::new();
    let mut n = 0u32;
    let mut pos = prompt.len() as u32;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(EvalError::Cancelled);
        }
        let tok = argmax(e.logits(0)?);
        if e.is_eog(tok) {
            break;
        }
        bytes.extend(e.token_bytes(tok));
        n += 1;
        if n >= max_new || stop(&String::from_utf8_lossy(&bytes)) {
            break;
        }
        e.decode_one(tok, pos, 0)?;
        pos += 1;
    }
    Ok((String::from_utf8_lossy(&bytes).into_owned(), n))
}

/// Runs `kind` on the items at `subset` of `items` with `e`.
/// `on_item(done, total)` reports progress.
///
/// # Errors
/// [`EvalError`]; a failing item is a wrong answer, not an error.
pub fn run_task<E: Engine>(
    e: &mut E,
    kind: TaskKind,
    items: &[TaskItem],
    cfg: &TaskConfig,
    cancel: &AtomicBool,
    on_item: &mut dyn FnMut(usize, usize),
) -> Result<TaskResult, EvalError> {
    let t0 = std::time::Instant::now();
    let idx = subset(items.len(), cfg.n_items, cfg.seed);
    // The one prompt path: the prompt `memwall serve` and the app's
    // chat give the same message.
    let fmt = e.chat_format().map_err(EngineError::from)?;
    let mut out = Vec::with_capacity(idx.len());
    for (k, &i) in idx.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return Err(EvalError::Cancelled);
        }
        let item = &items[i];
        let p = fmt
            .chat(
                &*e,
                &[ChatMessage {
                    role: "user".into(),
                    content: user_message(item),
                }],
            )
            .map_err(EngineError::from)?;
        let (prompt, toks) = (p.text, p.tokens);
        let n_prompt_tokens = toks.len() as u32;
        let r = match &item.body {
            ItemBody::Math { answer, .. } => {
                let (text, n) = generate(
                    e,
                    &toks,
                    cfg.max_new_tokens,
                    &|t| stop_generation(kind, t),
                    cancel,
                )?;
                let got = gsm8k_extract(&text).unwrap_or_default();
                let correct = !got.is_empty() && same_number(&got, answer);
                ItemResult {
                    id: item.id.clone(),
                    prompt,
                    n_prompt_tokens,
                    output: text,
                    n_gen_tokens: n,
                    extracted: got,
                    expected: answer.clone(),
                    correct,
                }
            }
            ItemBody::Choice { labels, answer, .. } => {
                if toks.len() > e.n_ctx() as usize {
                    return Err(EvalError::Config(format!(
                        "{}: prompt of {} tokens exceeds the context of {}",
                        item.id,
                        toks.len(),
                        e.n_ctx()
                    )));
                }
                e.kv_clear();
                e.prefill(&toks, 0, 0, true)?;
                let row = e.logits(0)?;
                let super::LogSumExp { max: m, ln_sum: l } = super::log_sum_exp(row);
                let mut scores = Vec::with_capacity(labels.len());
                for lab in labels {
                    let lt = e.tokenize(lab, false)?;
                    let t = *lt
                        .first()
                        .ok_or_else(|| EvalError::Config(format!("label {lab:?} has no tokens")))?;
                    scores.push((lab.clone(), row[t as usize] as f64 - m as f64 - l));
                }
                let best = scores
                    .iter()
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .map(|s| s.0.clone())
                    .unwrap_or_default();
                let output = scores
                    .iter()
                    .map(|(l, s)| format!("{l}:{s:.4}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                ItemResult {
                    id: item.id.clone(),
                    prompt,
                    n_prompt_tokens,
                    output,
                    n_gen_tokens: 0,
                    correct: &best == answer,
                    extracted: best,
                    expected: answer.clone(),
                }
            }
            ItemBody::Code {
                prompt: p,
                entry_point,
                test,
            } => {
                let (text, n) = generate(
                    e,
                    &toks,
                    cfg.max_new_tokens,
                    &|t| stop_generation(kind, t),
                    cancel,
                )?;
                let program = humaneval_program(p, entry_point, test, &text);
                let ex = run_python(&program, &cfg.sandbox)?;
                ItemResult {
                    id: item.id.clone(),
                    prompt,
                    n_prompt_tokens,
                    output: text,
                    n_gen_tokens: n,
                    extracted: format!("{} (isolation: {})", ex.status, ex.isolation),
                    expected: "passed".into(),
                    correct: ex.passed,
                }
            }
        };
        out.push(r);
        on_item(k + 1, idx.len());
    }
    let n = out.len() as u64;
    let correct = out.iter().filter(|r| r.correct).count() as u64;
    let Interval { low: lo, high: hi } = wilson_interval(correct, n, 1.96);
    Ok(TaskResult {
        task: kind.name().into(),
        config: cfg.clone(),
        n_total: items.len(),
        n,
        correct,
        accuracy: if n > 0 {
            correct as f64 / n as f64
        } else {
            f64::NAN
        },
        ci_low: lo,
        ci_high: hi,
        items: out,
        elapsed_ns: t0.elapsed().as_nanos() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gsm8k_numbers_are_extracted() {
        assert_eq!(
            gsm8k_reference("She makes 9 * 2 = $<<9*2=18>>18.\n#### 18").as_deref(),
            Some("18")
        );
        assert_eq!(gsm8k_reference("#### 1,234").as_deref(), Some("1234"));
        assert_eq!(
            gsm8k_extract("so 3 + 4 = 7\n#### 7\n").as_deref(),
            Some("7")
        );
        assert_eq!(
            gsm8k_extract("The answer is \\boxed{42}.").as_deref(),
            Some("42")
        );
        assert_eq!(
            gsm8k_extract("a loss of -5 dollars, total $1,000.50.").as_deref(),
            Some("1000.50")
        );
        assert_eq!(gsm8k_extract("no digits"), None);
        assert!(same_number("18.00", "18") && !same_number("18", "19"));
    }

    #[test]
    fn subsets_are_seeded_sorted_and_distinct() {
        let a = subset(1319, 50, 7);
        assert_eq!(a, subset(1319, 50, 7));
        assert_ne!(a, subset(1319, 50, 8));
        assert_eq!(a.len(), 50);
        assert!(a.windows(2).all(|w| w[0] < w[1]) && *a.last().unwrap() < 1319);
        assert_eq!(subset(5, 10, 1), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn code_blocks_and_programs() {
        let reply = "Here:\n```python\ndef f(x):\n    return x + 1\n```\nDone.";
        assert_eq!(extract_code_block(reply), "def f(x):\n    return x + 1\n");
        let p = humaneval_program(
            "from typing import List\n\ndef f(x):\n",
            "f",
            "def check(c):\n    assert c(1) == 2\n",
            reply,
        );
        assert!(
            p.starts_with("from typing import List\n\ndef f(x):\n    return x + 1\n"),
            "{p}"
        );
        assert!(p.ends_with("check(f)\n"));
        // A body-only reply is appended to the prompt.
        let p = humaneval_program("def f(x):\n", "f", "", "    return x + 1\n");
        assert!(p.starts_with("def f(x):\n    return x + 1\n"), "{p}");
        assert!(stop_generation(TaskKind::HumanEval, "```python\nx\n```"));
        assert!(!stop_generation(TaskKind::HumanEval, "```python\nx\n"));
        assert!(stop_generation(TaskKind::Gsm8k, "so\n#### 12\n"));
        assert!(!stop_generation(TaskKind::Gsm8k, "so\n#### 12"));
    }
}
