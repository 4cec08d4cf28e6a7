//! The llama.cpp engine, through the `llama-cpp-2` bindings (CPU here; the `cuda`
//! and `metal` features of memwall-core pass through to llama.cpp's back ends).

use super::{
    BatchItem, ChatMessage, Engine, EngineConfig, EngineError, EngineInfo, SeqItem, TokenEntry,
    TokenId, Vocab,
};
use crate::probe::model::CacheType;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Version of the `llama-cpp-sys-2` crate (and so of the vendored llama.cpp) this
/// binary was built against, read from Cargo.lock at build time.
pub const LLAMA_CPP_SYS_VERSION: &str = env!("MEMWALL_LLAMA_CPP_SYS_VERSION");

/// CMake build type llama.cpp was compiled with (`Release` = -O3, `RelWithDebInfo`
/// = -O2), as llama-cpp-sys-2's build script chooses it (`LLAMA_LIB_PROFILE`, else
/// cargo's debug setting). Part of [`engine_build`]: it moved pp512 by 15 % here.
pub const LLAMA_CPP_PROFILE: &str = env!("MEMWALL_LLAMA_CPP_PROFILE");

/// The engine build string every stored row carries, e.g.
/// `llama-cpp-sys-2 0.1.161 (CMake Release)`: bindings version (Cargo.lock) and
/// llama.cpp's CMake build type. Gates and results key on it, so a rebuild with
/// other optimisation flags does not inherit an older build's gate.
pub fn engine_build() -> String {
    format!("llama-cpp-sys-2 {LLAMA_CPP_SYS_VERSION} (CMake {LLAMA_CPP_PROFILE})")
}

mod split;
pub use split::gpu_count;

static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();

/// The process-wide llama.cpp back end (initialized once; llama.cpp's own logging
/// is silenced unless `MEMWALL_LLAMA_LOG=1`).
///
/// # Errors
/// [`EngineError::Setup`] when llama.cpp cannot initialize.
pub fn backend() -> Result<&'static LlamaBackend, EngineError> {
    BACKEND
        .get_or_init(|| {
            let mut b = LlamaBackend::init().map_err(|e| e.to_string())?;
            if std::env::var("MEMWALL_LLAMA_LOG").as_deref() != Ok("1") {
                b.void_logs();
            }
            Ok(b)
        })
        .as_ref()
        .map_err(|e| EngineError::Setup(e.clone()))
}

/// llama.cpp's `llama_print_system_info()`: the CPU features and back ends compiled in.
pub fn system_info() -> String {
    // SAFETY: returns a pointer to a static NUL-terminated string.
    unsafe {
        let p = llama_cpp_sys_2::llama_print_system_info();
        if p.is_null() {
            String::new()
        } else {
            std::ffi::CStr::from_ptr(p)
                .to_string_lossy()
                .trim()
                .to_string()
        }
    }
}

/// Reads the header of the model at `path` with memwall's bounds-checked reader
/// ([`crate::probe::gguf::Gguf::open`]): the one gate every llama.cpp load passes, so a
/// truncated or malformed file is refused with the field named before llama.cpp
/// maps it. Cost: the header only (milliseconds).
///
/// # Errors
/// [`EngineError::Model`] with the reader's error.
pub fn check_model(path: &Path) -> Result<(), EngineError> {
    crate::probe::gguf::Gguf::open(path)?;
    Ok(())
}

/// llama.cpp's registered back ends other than the CPU, `,`-separated, or `CPU` when
/// there are none; RPC back ends count once and only when they have a device. The
/// same string llama-bench writes in its `backends` column (its `test::get_backend()`).
pub fn backends() -> String {
    let name = |reg| {
        // SAFETY: `reg` comes from the registry; the name is a static NUL-terminated string.
        unsafe {
            let p = llama_cpp_sys_2::ggml_backend_reg_name(reg);
            if p.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        }
    };
    let mut names = Vec::new();
    let mut rpc_used = false;
    // SAFETY: plain registry queries; indices are below the count.
    for i in 0..unsafe { llama_cpp_sys_2::ggml_backend_reg_count() } {
        let reg = unsafe { llama_cpp_sys_2::ggml_backend_reg_get(i) };
        let n = name(reg);
        if n.starts_with("RPC") {
            rpc_used |= unsafe { llama_cpp_sys_2::ggml_backend_reg_dev_count(reg) } > 0;
        } else if n != "CPU" {
            names.push(n);
        }
    }
    if rpc_used {
        names.push("RPC".into());
    }
    if names.is_empty() {
        "CPU".into()
    } else {
        names.join(",")
    }
}

/// A loaded model, shareable between contexts (llama-bench reuses one model across
/// instances that differ only in context parameters).
#[derive(Clone)]
pub struct LlamaModelHandle {
    model: Arc<LlamaModel>,
    n_gpu_layers: u32,
}

/// A model's tokenizer alone (llama.cpp `vocab_only` load: no weights are read),
/// for counting tokens of text produced elsewhere (a server's streamed output).
pub struct VocabOnly {
    model: LlamaModel,
}

impl VocabOnly {
    /// Loads the vocabulary of the GGUF file at `path`.
    ///
    /// # Errors
    /// [`EngineError::Model`] when the file fails memwall's GGUF checks,
    /// [`EngineError::Load`] naming the file when llama.cpp refuses it.
    pub fn load(path: &Path) -> Result<VocabOnly, EngineError> {
        check_model(path)?;
        let backend = backend()?;
        let params = LlamaModelParams::default().with_vocab_only(true);
        let model =
            LlamaModel::load_from_file(backend, path, &params).map_err(|e| EngineError::Load {
                path: path.display().to_string(),
                reason: format!("{e} (loading its vocabulary only)"),
            })?;
        Ok(VocabOnly { model })
    }

    /// Tokens of `text` without BOS/EOS (special-token text is parsed as such).
    pub fn count(&self, text: &str) -> usize {
        self.model
            .vocab()
            .tokenize(text.as_bytes(), false, true)
            .len()
    }
}

impl LlamaModelHandle {
    /// Loads the model at `path` (memory-mapped) with `n_gpu_layers` offloaded,
    /// after [`check_model`] has read its header.
    ///
    /// # Errors
    /// [`EngineError::Model`] when the file fails memwall's GGUF checks,
    /// [`EngineError::Load`] naming the file when llama.cpp refuses it.
    pub fn load(path: &Path, n_gpu_layers: u32) -> Result<LlamaModelHandle, EngineError> {
        check_model(path)?;
        let backend = backend()?;
        let params = LlamaModelParams::default().with_n_gpu_layers(n_gpu_layers);
        let model =
            LlamaModel::load_from_file(backend, path, &params).map_err(|e| EngineError::Load {
                path: path.display().to_string(),
                reason: format!(
                    "{e} (is it a GGUF model llama.cpp supports? run `memwall model info` on it)"
                ),
            })?;
        Ok(LlamaModelHandle {
            model: Arc::new(model),
            n_gpu_layers,
        })
    }

    /// Loads the model at `path` with every weight in the plain CPU buffer type
    /// (a tensor buffer-type override matching all tensors), so llama.cpp does **not**
    /// repack weights into its interleaved layouts. Repacked matmuls compute a row
    /// differently depending on how many rows share the batch (groups of 4 go
    /// through a GEMM kernel, the rest through a GEMV kernel), so the logits of a
    /// position depend on the batch shape; speculative verification then cannot be
    /// token-identical to one-token decoding. Without repacking every output element
    /// is one `vec_dot` of a weight row and an activation row, whatever the batch.
    ///
    /// # Errors
    /// As [`LlamaModelHandle::load`].
    pub fn load_no_repack(path: &Path) -> Result<LlamaModelHandle, EngineError> {
        Self::load_no_repack_ngl(path, 0)
    }

    /// As [`LlamaModelHandle::load_no_repack`], with `n_gpu_layers` layers offloaded
    /// (llama-bench's `-ngl`; 0 on a CPU-only build).
    ///
    /// # Errors
    /// As [`LlamaModelHandle::load_no_repack`].
    pub fn load_no_repack_ngl(
        path: &Path,
        n_gpu_layers: u32,
    ) -> Result<LlamaModelHandle, EngineError> {
        check_model(path)?;
        let _backend = backend()?;
        let load_err = |reason: String| EngineError::Load {
            path: path.display().to_string(),
            reason,
        };
        let cpath = std::ffi::CString::new(path.to_string_lossy().as_bytes())
            .map_err(|e| load_err(format!("path has a NUL byte: {e}")))?;
        // llama-cpp-2 0.1.160 has no setter for `use_extra_bufts`: load through the C
        // API with llama.cpp's defaults plus `use_extra_bufts = false`.
        // SAFETY: plain C calls; `cpath` outlives the call; the returned pointer is
        // owned by the `LlamaModel` built below, which frees it on drop.
        let raw = unsafe {
            let mut p = llama_cpp_sys_2::llama_model_default_params();
            p.n_gpu_layers = n_gpu_layers.min(i32::MAX as u32) as i32;
            p.use_extra_bufts = false;
            llama_cpp_sys_2::llama_model_load_from_file(cpath.as_ptr(), p)
        };
        let nn = std::ptr::NonNull::new(raw).ok_or_else(|| {
            load_err("llama.cpp returned no model (is it a GGUF model llama.cpp supports?)".into())
        })?;
        // SAFETY: `LlamaModel` is `#[repr(transparent)]` over `Ptr<llama_model>`, itself
        // `#[repr(transparent)]` over `NonNull<llama_model>` (llama-cpp-2 0.1.160,
        // src/model.rs and src/ptr.rs; the version is pinned with `=` in Cargo.toml).
        let model: LlamaModel = unsafe { std::mem::transmute(nn) };
        Ok(LlamaModelHandle {
            model: Arc::new(model),
            n_gpu_layers,
        })
    }

    /// Loads only the vocabulary of the model at `path` (llama.cpp `vocab_only`: no
    /// weights are read): the tokenizer another engine (MLX) shares with llama.cpp.
    /// The handle tokenizes; it cannot make an engine.
    ///
    /// # Errors
    /// As [`LlamaModelHandle::load`].
    pub fn load_vocab_only(path: &Path) -> Result<LlamaModelHandle, EngineError> {
        let VocabOnly { model } = VocabOnly::load(path)?;
        Ok(LlamaModelHandle {
            model: Arc::new(model),
            n_gpu_layers: 0,
        })
    }

    /// Layers offloaded to the GPU (llama-bench's `-ngl`).
    pub fn n_gpu_layers(&self) -> u32 {
        self.n_gpu_layers
    }

    /// Logit width.
    pub fn n_vocab(&self) -> usize {
        self.model.n_vocab().max(0) as usize
    }

    /// The text of a token with special tokens rendered (`<|im_end|>`), lossy UTF-8.
    pub fn token_text(&self, token: TokenId) -> String {
        String::from_utf8_lossy(
            &self
                .model
                .vocab()
                .token_to_piece(LlamaToken(token), true, None),
        )
        .into_owned()
    }

    /// The BOS and EOS tokens' ids (whether or not the model adds BOS).
    pub fn bos_eos(&self) -> (TokenId, TokenId) {
        let v = self.model.vocab();
        (v.bos().0, v.eos().0)
    }

    /// Applies llama.cpp's built-in template matcher (`llama_chat_apply_template`)
    /// for `template`: the GGUF's own `tokenizer.chat_template` when `None`, else a
    /// built-in name (`chatml`, `llama3`, …) or template text, ending with the
    /// assistant's opening tag.
    ///
    /// # Errors
    /// [`EngineError::Tokenize`] when llama.cpp does not recognise the template.
    fn apply_template(
        &self,
        template: Option<&str>,
        messages: &[ChatMessage],
    ) -> Result<String, EngineError> {
        let m = &self.model;
        let tmpl = match template {
            None => m
                .chat_template(None)
                .map_err(|e| EngineError::Tokenize(format!("model has no chat template: {e}")))?,
            Some(t) => llama_cpp_2::model::LlamaChatTemplate::new(t)
                .map_err(|e| EngineError::Tokenize(e.to_string()))?,
        };
        let msgs = messages
            .iter()
            .map(|c| LlamaChatMessage::new(c.role.clone(), c.content.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| EngineError::Tokenize(e.to_string()))?;
        m.apply_chat_template(&tmpl, &msgs, true)
            .map_err(|e| EngineError::Tokenize(e.to_string()))
    }

    /// llama.cpp's own rendering of the file's template (its built-in matcher), the
    /// reference the tests compare memwall's one prompt path against
    /// ([`crate::measure::prompt::ChatFormat::chat`]); no command builds a prompt
    /// with it.
    ///
    /// # Errors
    /// [`EngineError::Tokenize`] when the model has no template or llama.cpp does
    /// not recognise it.
    pub fn apply_chat_template(&self, messages: &[ChatMessage]) -> Result<String, EngineError> {
        self.apply_template(None, messages)
    }

    /// Creates an engine (a context) on this model (most callers open one through
    /// [`super::open`]).
    ///
    /// # Errors
    /// [`EngineError::Setup`] when llama.cpp refuses the context (e.g. out of memory).
    pub fn engine(&self, cfg: &EngineConfig) -> Result<LlamaEngine, EngineError> {
        LlamaEngine::new(self.clone(), cfg)
    }
}

/// The tokenizer of the model, without a context: safe to call from any thread while
/// an engine on this model runs.
impl Vocab for LlamaModelHandle {
    fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, EngineError> {
        tokenize_in(&self.model, text, add_special)
    }

    fn token_bytes(&self, token: TokenId) -> Vec<u8> {
        self.model
            .vocab()
            .token_to_piece(LlamaToken(token), false, None)
    }

    fn is_eog(&self, token: TokenId) -> bool {
        self.model.vocab().is_eog(LlamaToken(token))
    }

    fn bos(&self) -> Option<TokenId> {
        let v = self.model.vocab();
        v.should_add_bos().then(|| v.bos().0)
    }

    fn apply_builtin_template(
        &self,
        name: &str,
        messages: &[ChatMessage],
    ) -> Result<String, EngineError> {
        self.apply_template(Some(name), messages)
    }

    fn vocabulary(&self) -> Result<Vec<TokenEntry>, EngineError> {
        Ok(vocabulary_of(&self.model))
    }

    fn tokenize_plain(&self, text: &str) -> Result<Vec<TokenId>, EngineError> {
        let toks = self.model.vocab().tokenize(text.as_bytes(), false, false);
        if toks.is_empty() && !text.is_empty() {
            return Err(EngineError::Tokenize(format!(
                "llama.cpp returned no tokens for {} bytes of text",
                text.len()
            )));
        }
        Ok(toks.into_iter().map(|t| t.0).collect())
    }

    fn prompt_vocab(&self) -> Result<crate::measure::prompt::PromptVocab, EngineError> {
        use crate::measure::prompt::{
            ATTR_CONTROL, ATTR_UNKNOWN, ATTR_USER_DEFINED, PromptVocab, SpecialToken,
        };
        let v = self.model.vocab();
        let n = v.n_tokens().max(0);
        // llama.cpp's special-token cache: control, user-defined and unknown tokens.
        let specials = (0..n)
            .filter_map(|i| {
                let t = LlamaToken(i);
                let attr = v.attr(t).bits();
                if attr & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN) == 0 {
                    return None;
                }
                let text = v.text(t)?.to_str().ok()?.to_string();
                (!text.is_empty()).then_some(SpecialToken { id: i, text, attr })
            })
            .collect();
        let (bos, eos) = self.bos_eos();
        let text = |t: TokenId| {
            if (0..n).contains(&t) {
                self.token_text(t)
            } else {
                String::new()
            }
        };
        Ok(PromptVocab {
            template: self
                .model
                .chat_template(None)
                .ok()
                .and_then(|t| t.to_string().ok()),
            bos_text: text(bos),
            eos_text: text(eos),
            bos: Vocab::bos(self),
            specials,
        })
    }
}

fn kv_type(c: CacheType) -> KvCacheType {
    match c {
        CacheType::F16 => KvCacheType::F16,
        CacheType::Bf16 => KvCacheType::BF16,
        CacheType::F32 => KvCacheType::F32,
        CacheType::Q8_0 => KvCacheType::Q8_0,
        CacheType::Q4_0 => KvCacheType::Q4_0,
    }
}

self_cell::self_cell!(
    struct ModelContext {
        owner: Arc<LlamaModel>,
        #[covariant]
        dependent: LlamaContext,
    }
);

/// A llama.cpp context on a loaded model: one [`Engine`].
pub struct LlamaEngine {
    handle: LlamaModelHandle,
    cell: ModelContext,
    batch: LlamaBatch<'static>,
    batch_cap: usize,
    /// Batch indices of the items that kept logits in the last decode.
    out_idx: Vec<i32>,
    cfg: EngineConfig,
    snapshot: Option<llama_cpp_2::context::session::SeqState>,
}

// SAFETY: llama.cpp contexts are not tied to a thread (llama-cpp-2 marks
// LlamaContext Send); the batch owns its buffers.
unsafe impl Send for LlamaEngine {}

impl LlamaEngine {
    fn new(handle: LlamaModelHandle, cfg: &EngineConfig) -> Result<LlamaEngine, EngineError> {
        let backend = backend()?;
        let mut params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(cfg.n_ctx.max(1)))
            .with_n_batch(cfg.n_batch.max(1))
            .with_n_ubatch(cfg.n_ubatch.max(1).min(cfg.n_batch.max(1)))
            .with_n_threads(cfg.n_threads.max(1) as i32)
            .with_n_threads_batch(cfg.n_threads_batch.max(1) as i32)
            .with_n_seq_max(cfg.n_seq_max.max(1))
            .with_kv_unified(cfg.kv_unified)
            .with_type_k(kv_type(cfg.type_k))
            .with_type_v(kv_type(cfg.type_v));
        if let Some(fa) = cfg.flash_attn {
            params = params.with_flash_attention_policy(if fa {
                llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED
            } else {
                llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED
            });
        }
        let cell = ModelContext::try_new(handle.model.clone(), |m| m.new_context(backend, params))
            .map_err(|e| {
                EngineError::Setup(format!("llama.cpp refused the context ({cfg:?}): {e}"))
            })?;
        let batch_cap = cfg.n_batch.max(1) as usize;
        Ok(LlamaEngine {
            handle,
            cell,
            batch: LlamaBatch::new(batch_cap, cfg.n_seq_max.max(1) as i32),
            batch_cap,
            out_idx: Vec::new(),
            cfg: cfg.clone(),
            snapshot: None,
        })
    }

    /// The configuration this context was created with.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// The model handle (to create sibling contexts).
    pub fn model(&self) -> &LlamaModelHandle {
        &self.handle
    }

    /// A sequence id this context has (llama.cpp aborts on any other).
    fn check_seq(&self, seq: i32) -> Result<(), EngineError> {
        let n = self.cfg.n_seq_max.max(1) as i32;
        if (0..n).contains(&seq) {
            Ok(())
        } else {
            Err(EngineError::Kv(format!(
                "sequence {seq} is not one of this context's 0..{n} (n_seq_max {n})"
            )))
        }
    }
}

/// The context's model's tokenizer ([`LlamaModelHandle`]'s).
impl Vocab for LlamaEngine {
    fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, EngineError> {
        self.handle.tokenize(text, add_special)
    }
    fn token_bytes(&self, token: TokenId) -> Vec<u8> {
        self.handle.token_bytes(token)
    }
    fn is_eog(&self, token: TokenId) -> bool {
        self.handle.is_eog(token)
    }
    fn bos(&self) -> Option<TokenId> {
        self.handle.bos()
    }
    fn apply_builtin_template(
        &self,
        name: &str,
        messages: &[ChatMessage],
    ) -> Result<String, EngineError> {
        self.handle.apply_builtin_template(name, messages)
    }
    fn vocabulary(&self) -> Result<Vec<TokenEntry>, EngineError> {
        self.handle.vocabulary()
    }
    fn tokenize_plain(&self, text: &str) -> Result<Vec<TokenId>, EngineError> {
        self.handle.tokenize_plain(text)
    }
    fn prompt_vocab(&self) -> Result<crate::measure::prompt::PromptVocab, EngineError> {
        self.handle.prompt_vocab()
    }
}

impl Engine for LlamaEngine {
    fn shape_change_is_costly(&self) -> bool {
        self.handle.n_gpu_layers() > 0 && backends().split(',').any(|b| b == "CUDA")
    }
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "llama.cpp".into(),
            build: engine_build(),
            backends: backends(),
            system_info: system_info(),
        }
    }

    fn n_vocab(&self) -> usize {
        self.handle.n_vocab()
    }

    fn n_ctx(&self) -> u32 {
        self.cell.borrow_dependent().n_ctx()
    }

    fn n_batch(&self) -> u32 {
        self.cfg.n_batch
    }

    fn n_ctx_seq(&self) -> u32 {
        // One buffer for all sequences: each may use all of it.
        if self.cfg.kv_unified {
            self.n_ctx()
        } else {
            self.n_ctx() / self.cfg.n_seq_max.max(1)
        }
    }

    fn decode(&mut self, items: &[BatchItem]) -> Result<(), EngineError> {
        if items.is_empty() {
            return Ok(());
        }
        if items.len() > self.batch_cap {
            return Err(EngineError::Decode(format!(
                "batch of {} exceeds n_batch {} (use Engine::prefill to chunk)",
                items.len(),
                self.batch_cap
            )));
        }
        self.batch.clear();
        self.out_idx.clear();
        for (i, it) in items.iter().enumerate() {
            self.batch
                .add(LlamaToken(it.token), it.pos as i32, &[it.seq], it.logits)
                .map_err(|e| EngineError::Decode(e.to_string()))?;
            if it.logits {
                self.out_idx.push(i as i32);
            }
        }
        let batch = &mut self.batch;
        self.cell
            .with_dependent_mut(|_, ctx| ctx.decode(batch))
            .map_err(|e| EngineError::Decode(e.to_string()))
    }

    fn decode_seqs(&mut self, items: &[SeqItem<'_>]) -> Result<(), EngineError> {
        if items.is_empty() {
            return Ok(());
        }
        if items.len() > self.batch_cap {
            return Err(EngineError::Decode(format!(
                "batch of {} exceeds n_batch {}",
                items.len(),
                self.batch_cap
            )));
        }
        let n_seq_max = self.cfg.n_seq_max.max(1) as i32;
        // Checked before the batch is touched, so a refused batch leaves the last
        // pass's logits as they were. The batch holds n_seq_max ids per token: more
        // would write past them.
        if let Some((i, it)) = items.iter().enumerate().find(|(_, it)| {
            it.seqs.is_empty()
                || it.seqs.len() > n_seq_max as usize
                || it.seqs.iter().any(|&s| s < 0 || s >= n_seq_max)
        }) {
            return Err(EngineError::Decode(format!(
                "item {i} has sequences {:?}: each needs 1 to {n_seq_max} ids in 0..{n_seq_max} (n_seq_max)",
                it.seqs
            )));
        }
        self.batch.clear();
        self.out_idx.clear();
        for (i, it) in items.iter().enumerate() {
            self.batch
                .add(LlamaToken(it.token), it.pos as i32, it.seqs, it.logits)
                .map_err(|e| EngineError::Decode(e.to_string()))?;
            if it.logits {
                self.out_idx.push(i as i32);
            }
        }
        let batch = &mut self.batch;
        self.cell
            .with_dependent_mut(|_, ctx| ctx.decode(batch))
            .map_err(|e| EngineError::Decode(e.to_string()))
    }

    fn logits(&self, i: usize) -> Result<&[f32], EngineError> {
        let &bi = self.out_idx.get(i).ok_or(EngineError::NoLogits {
            index: i,
            kept: self.out_idx.len(),
        })?;
        Ok(self.cell.borrow_dependent().get_logits_ith(bi))
    }

    fn kv_truncate(&mut self, seq: i32, from_pos: u32) -> Result<(), EngineError> {
        self.check_seq(seq)?;
        self.cell
            .with_dependent_mut(|_, ctx| {
                ctx.clear_kv_cache_seq(Some(seq as u32), Some(from_pos), None)
            })
            .map_err(|e| e.to_string())
            .and_then(|ok| {
                if ok {
                    Ok(())
                } else {
                    Err("llama.cpp refused a partial removal (recurrent/hybrid model?)".into())
                }
            })
            .map_err(|e| {
                EngineError::Kv(format!(
                    "cannot remove positions >= {from_pos} of sequence {seq}: {e}"
                ))
            })
    }

    fn kv_copy(&mut self, src: i32, dst: i32, n_tokens: u32) -> Result<(), EngineError> {
        self.check_seq(src)?;
        self.check_seq(dst)?;
        // Sequences in separate KV streams (llama.cpp's default, `kv_unified = false`)
        // can only be copied whole: copy, then drop positions >= n_tokens.
        self.cell
            .with_dependent_mut(|_, ctx| {
                let _ = ctx.clear_kv_cache_seq(Some(dst as u32), None, None);
                ctx.copy_kv_cache_seq(src, dst, None, None)
            })
            .map_err(|e| EngineError::Kv(format!("cannot copy sequence {src} into {dst}: {e}")))?;
        self.kv_truncate(dst, n_tokens)
    }

    fn kv_park(&mut self, src: i32, dst: i32) -> Result<(), EngineError> {
        self.check_seq(src)?;
        self.check_seq(dst)?;
        if !self.cfg.kv_unified {
            // Separate KV streams copy a whole stream over the other.
            return Err(EngineError::Kv(format!(
                "parking sequence {src} in {dst} needs a unified KV cache (kv_unified)"
            )));
        }
        self.cell
            .with_dependent_mut(|_, ctx| ctx.copy_kv_cache_seq(src, dst, None, None))
            .map_err(|e| EngineError::Kv(format!("cannot park sequence {src} in {dst}: {e}")))
    }

    fn kv_clear(&mut self) {
        self.cell.with_dependent_mut(|_, ctx| ctx.clear_kv_cache());
    }

    fn synchronize(&mut self) {
        self.cell.borrow_dependent().synchronize();
    }

    fn save_seq_state(&mut self, seq: i32) -> Result<(), EngineError> {
        let st = self
            .cell
            .borrow_dependent()
            .state_seq_get(seq, Default::default())
            .map_err(|e| EngineError::Kv(format!("cannot save sequence {seq}: {e}")))?;
        self.snapshot = Some(st);
        Ok(())
    }

    fn restore_seq_state(&mut self, seq: i32) -> Result<(), EngineError> {
        let Some(st) = self.snapshot.as_ref() else {
            return Err(EngineError::Kv("no saved sequence state to restore".into()));
        };
        self.cell
            .with_dependent_mut(|_, ctx| ctx.state_seq_set(st, seq))
            .map_err(|e| EngineError::Kv(format!("cannot restore sequence {seq}: {e}")))
    }

    fn seq_state_bytes(&self, seq: i32) -> Result<u64, EngineError> {
        Ok(self
            .cell
            .borrow_dependent()
            .state_seq_get_size_ext(seq, Default::default()) as u64)
    }
}

/// Every token of `model`'s vocabulary: stored text, the piece it renders to with
/// special tokens spelled out, llama.cpp's attribute bits, and the end flag.
fn vocabulary_of(model: &LlamaModel) -> Vec<TokenEntry> {
    let v = model.vocab();
    (0..v.n_tokens().max(0))
        .map(|i| {
            let t = LlamaToken(i);
            TokenEntry {
                text: v.text(t).map(|c| c.to_bytes().to_vec()).unwrap_or_default(),
                piece: v.token_to_piece(t, true, None),
                attr: v.attr(t).bits(),
                eog: v.is_eog(t),
            }
        })
        .collect()
}

/// `text` as `model`'s tokens (special tokens parsed); an empty result for non-empty
/// text is an error, not an empty prompt.
fn tokenize_in(
    model: &LlamaModel,
    text: &str,
    add_special: bool,
) -> Result<Vec<TokenId>, EngineError> {
    let toks = model.vocab().tokenize(text.as_bytes(), add_special, true);
    if toks.is_empty() && !text.is_empty() {
        return Err(EngineError::Tokenize(format!(
            "llama.cpp returned no tokens for {} bytes of text",
            text.len()
        )));
    }
    Ok(toks.into_iter().map(|t| t.0).collect())
}

#[cfg(test)]
mod tests {
    /// A build without GPU back ends registers only the CPU; llama-bench then writes `CPU`.
    #[cfg(not(any(feature = "cuda", feature = "metal")))]
    #[test]
    fn a_cpu_only_build_reports_the_cpu_back_end() {
        super::backend().unwrap();
        // The registry is populated (an empty one would also print `CPU`) and holds the CPU.
        // SAFETY: registry queries with indices below the count.
        let names: Vec<String> = (0..unsafe { llama_cpp_sys_2::ggml_backend_reg_count() })
            .map(|i| unsafe {
                let reg = llama_cpp_sys_2::ggml_backend_reg_get(i);
                std::ffi::CStr::from_ptr(llama_cpp_sys_2::ggml_backend_reg_name(reg))
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, ["CPU"]);
        assert_eq!(super::backends(), "CPU");
    }
}
