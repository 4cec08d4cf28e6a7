//! Choosing and opening an engine: [`EngineKind`] (parse, name, what it holds),
//! [`Model::load`] (the one place that refuses an engine this build lacks) and
//! [`open`].

use super::{BoxedEngine, Engine, EngineConfig, EngineError};
use crate::probe::model::HeldAs;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `n_gpu_layers` that offloads every layer: llama.cpp offloads
/// `min(n_gpu_layers, n_layer + 1)` layers, so any value above a model's layer
/// count means all of them (llama-bench's `-ngl -1`; memwall's field is unsigned,
/// and rows store 999 for "all").
pub const ALL_LAYERS: u32 = 999;

/// An engine a model runs on, with how it holds the GGUF's weights: llama.cpp runs
/// the file as it is; MLX holds them (dequantized by llama.cpp's `to_float`) as f16
/// or requantized by MLX (affine, group 64). The same choice and spelling as
/// `--engine` everywhere (bench, serve, speculative, the frontier's MLX arms).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// llama.cpp on the GGUF as it is.
    #[default]
    Llama,
    /// MLX at 4 bits (`mlx`, `mlx-4bit`).
    Mlx4bit,
    /// MLX at 8 bits (`mlx-8bit`).
    Mlx8bit,
    /// MLX at f16 (`mlx-f16`).
    MlxF16,
}

impl EngineKind {
    /// Every kind, in `--engine`'s order.
    pub const ALL: [EngineKind; 4] = [
        EngineKind::Llama,
        EngineKind::Mlx4bit,
        EngineKind::Mlx8bit,
        EngineKind::MlxF16,
    ];

    /// `llama`, `mlx-4bit`, `mlx-8bit`, `mlx-f16`.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Llama => "llama",
            EngineKind::Mlx4bit => "mlx-4bit",
            EngineKind::Mlx8bit => "mlx-8bit",
            EngineKind::MlxF16 => "mlx-f16",
        }
    }

    /// The engine's own name, as [`super::EngineInfo::name`] gives it: `llama.cpp`
    /// or `mlx`.
    pub fn engine_name(self) -> &'static str {
        match self {
            EngineKind::Llama => "llama.cpp",
            EngineKind::Mlx4bit | EngineKind::Mlx8bit | EngineKind::MlxF16 => "mlx",
        }
    }

    /// How this engine holds a GGUF's weights (the memory guard sizes a model by it).
    pub fn held_as(self) -> HeldAs {
        match self {
            EngineKind::Llama => HeldAs::File,
            EngineKind::Mlx4bit => HeldAs::Affine(4),
            EngineKind::Mlx8bit => HeldAs::Affine(8),
            EngineKind::MlxF16 => HeldAs::F16,
        }
    }

    /// Whether this build includes the engine (its Cargo feature).
    pub fn is_built(self) -> bool {
        match self {
            EngineKind::Llama => cfg!(feature = "llama"),
            EngineKind::Mlx4bit | EngineKind::Mlx8bit | EngineKind::MlxF16 => {
                cfg!(feature = "mlx")
            }
        }
    }

    /// Parses `llama` (or `llama.cpp`), `mlx` (= `mlx-4bit`), `mlx-4bit`, `mlx-8bit`,
    /// `mlx-f16`.
    ///
    /// # Errors
    /// [`EngineError::UnknownKind`] naming the value and the accepted ones.
    pub fn parse(s: &str) -> Result<EngineKind, EngineError> {
        Ok(match s.trim() {
            "llama" | "llama.cpp" => EngineKind::Llama,
            "mlx" | "mlx-4bit" => EngineKind::Mlx4bit,
            "mlx-8bit" => EngineKind::Mlx8bit,
            "mlx-f16" => EngineKind::MlxF16,
            other => return Err(EngineError::UnknownKind(other.to_string())),
        })
    }
}

impl EngineKind {
    /// The text of [`EngineError::NotBuilt`]: which feature to build with.
    pub(super) fn not_built(self) -> String {
        match self {
            EngineKind::Llama => format!(
                "{self}: this memwall was built without the llama.cpp engine: build with the `llama` feature (on by default)"
            ),
            _ => format!(
                "{self}: this memwall was built without the MLX engine: run scripts/setup-mlx.sh, then build with `--features mlx`"
            ),
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`Model::load`] read, per engine.
enum Loaded {
    /// llama.cpp's model (weights mapped once; a context per configuration).
    #[cfg(feature = "llama")]
    Llama(super::llama::LlamaModelHandle),
    /// MLX: the weights live in the engine itself, sized at load; kept as the held
    /// engine of the [`Model`].
    #[cfg(feature = "mlx")]
    Mlx {
        /// The arm.
        quant: super::mlx::MlxQuant,
        /// llama.cpp's vocabulary of the file, which the engines tokenize with.
        vocab: super::llama::LlamaModelHandle,
    },
    /// A build without engines loads nothing (keeps the matches below exhaustive).
    #[cfg(not(feature = "llama"))]
    #[allow(dead_code)]
    Nothing(std::convert::Infallible),
}

/// A model file opened by one engine kind; engines for any configuration are made
/// from it. llama.cpp maps the weights once and makes a context per configuration
/// (llama-bench reuses a model across instances the same way); MLX loads the
/// weights into an engine whose context and batch are fixed at load, so a held MLX
/// engine serves every later configuration that fits it.
pub struct Model {
    kind: EngineKind,
    path: PathBuf,
    loaded: Loaded,
    /// The engine made last, with the configuration it was made for.
    held: Option<(EngineConfig, BoxedEngine)>,
}

impl Model {
    /// Opens the GGUF at `path` on `kind`. `sizing` is the largest configuration the
    /// caller will ask for: llama.cpp reads `n_gpu_layers`, `repack` and `split` from it; MLX
    /// loads its engine now, with `sizing`'s context and batch.
    ///
    /// # Errors
    /// [`EngineError::NotBuilt`] when this build lacks `kind` (the only place that
    /// refuses it; nothing is read then); the engine's load errors naming the file.
    pub fn load(
        kind: EngineKind,
        path: &Path,
        sizing: &EngineConfig,
    ) -> Result<Model, EngineError> {
        let model = |loaded: Loaded, held: Option<(EngineConfig, BoxedEngine)>| Model {
            kind,
            path: path.to_path_buf(),
            loaded,
            held,
        };
        match kind {
            #[cfg(feature = "llama")]
            EngineKind::Llama => {
                use super::llama::LlamaModelHandle;
                let h = LlamaModelHandle::load_split(
                    path,
                    sizing.n_gpu_layers,
                    sizing.repack,
                    &sizing.split,
                )?;
                Ok(model(Loaded::Llama(h), None))
            }
            #[cfg(feature = "mlx")]
            EngineKind::Mlx4bit | EngineKind::Mlx8bit | EngineKind::MlxF16 => {
                let quant = super::mlx::MlxQuant::of(kind);
                let e = super::mlx::MlxEngine::load(path, quant, sizing.n_ctx, sizing.n_batch)?;
                let vocab = e.vocab_handle().clone();
                let held: BoxedEngine = Box::new(e);
                Ok(model(
                    Loaded::Mlx { quant, vocab },
                    Some((sizing.clone(), held)),
                ))
            }
            #[allow(unreachable_patterns)]
            other => {
                let _ = (model, sizing);
                Err(EngineError::NotBuilt(other))
            }
        }
    }

    /// The engine kind.
    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    /// The GGUF file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The model's tokenizer without an engine's context (callable from any thread
    /// while an engine runs): llama.cpp's vocabulary of the file, which every engine
    /// here tokenizes with.
    #[cfg(feature = "llama")]
    pub fn tokenizer(&self) -> super::llama::LlamaModelHandle {
        match &self.loaded {
            Loaded::Llama(h) => h.clone(),
            #[cfg(feature = "mlx")]
            Loaded::Mlx { vocab, .. } => vocab.clone(),
        }
    }

    /// The engine for `cfg`, held by the model: the one made earlier when the engine
    /// can serve `cfg` with it (MLX: the same batch and a context at least as long;
    /// its caches are cleared), else a new one that replaces it (llama.cpp: a
    /// context per configuration, as llama-bench makes one per test; the old one is
    /// freed first).
    ///
    /// # Errors
    /// The engine's errors making a context or loading.
    pub fn engine(&mut self, cfg: &EngineConfig) -> Result<&mut BoxedEngine, EngineError> {
        let fits = self
            .held
            .as_ref()
            .is_some_and(|(at, _)| self.serves(at, cfg));
        if !fits {
            self.held = None;
            let e = self.make(cfg)?;
            self.held = Some((cfg.clone(), e));
        }
        let e = &mut self.held.as_mut().expect("set above").1;
        if fits {
            e.kv_clear();
        }
        Ok(e)
    }

    /// An engine for `cfg` the caller owns: the held one when it serves `cfg` (see
    /// [`Model::engine`]), else a new one.
    ///
    /// # Errors
    /// As [`Model::engine`].
    pub fn take_engine(&mut self, cfg: &EngineConfig) -> Result<BoxedEngine, EngineError> {
        match self.held.take() {
            Some((at, e)) if self.serves(&at, cfg) => Ok(e),
            _ => self.make(cfg),
        }
    }

    /// Whether an engine made for `at` serves `cfg` as a new one would.
    fn serves(&self, at: &EngineConfig, cfg: &EngineConfig) -> bool {
        match &self.loaded {
            #[cfg(feature = "llama")]
            Loaded::Llama(_) => {
                let _ = (at, cfg);
                false
            }
            #[cfg(feature = "mlx")]
            Loaded::Mlx { .. } => at.n_batch == cfg.n_batch && at.n_ctx >= cfg.n_ctx,
            #[cfg(not(feature = "llama"))]
            Loaded::Nothing(n) => {
                let _ = (at, cfg);
                match *n {}
            }
        }
    }

    /// A new engine for `cfg`.
    fn make(&self, cfg: &EngineConfig) -> Result<BoxedEngine, EngineError> {
        match &self.loaded {
            #[cfg(feature = "llama")]
            Loaded::Llama(h) => Ok(Box::new(h.engine(cfg)?)),
            #[cfg(feature = "mlx")]
            Loaded::Mlx { quant, .. } => Ok(Box::new(super::mlx::MlxEngine::load(
                &self.path,
                *quant,
                cfg.n_ctx,
                cfg.n_batch,
            )?)),
            #[cfg(not(feature = "llama"))]
            Loaded::Nothing(n) => match *n {},
        }
    }
}

/// Opens the GGUF at `path` on `kind` with `cfg`: [`Model::load`], then its engine.
///
/// # Errors
/// As [`Model::load`] and [`Model::engine`].
pub fn open(kind: EngineKind, path: &Path, cfg: &EngineConfig) -> Result<BoxedEngine, EngineError> {
    Model::load(kind, path, cfg)?.take_engine(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_back_from_its_name() {
        for k in EngineKind::ALL {
            assert_eq!(EngineKind::parse(k.name()).unwrap(), k);
            assert_eq!(k.to_string(), k.name());
        }
        assert_eq!(EngineKind::parse(" mlx ").unwrap(), EngineKind::Mlx4bit);
        assert_eq!(EngineKind::parse("llama.cpp").unwrap(), EngineKind::Llama);
        let e = EngineKind::parse("vllm").unwrap_err().to_string();
        assert_eq!(
            e,
            "--engine \"vllm\": use llama, mlx (= mlx-4bit), mlx-8bit or mlx-f16"
        );
    }

    #[test]
    fn each_kind_names_its_engine_and_what_it_holds() {
        let got: Vec<_> = EngineKind::ALL
            .iter()
            .map(|k| (k.engine_name(), k.held_as()))
            .collect();
        assert_eq!(
            got,
            [
                ("llama.cpp", HeldAs::File),
                ("mlx", HeldAs::Affine(4)),
                ("mlx", HeldAs::Affine(8)),
                ("mlx", HeldAs::F16),
            ]
        );
        // The serialized spelling rows and requests carry.
        assert_eq!(
            serde_json::to_string(&EngineKind::ALL).unwrap(),
            r#"["llama","mlx4bit","mlx8bit","mlx-f16"]"#
        );
    }

    /// A kind this build lacks is refused by `open` before the file is read (the
    /// path does not exist), with the feature to build with; a kind it has gets as
    /// far as the file.
    #[test]
    fn open_refuses_an_engine_this_build_lacks_before_reading_the_file() {
        let missing = Path::new("/nonexistent/memwall-open-test.gguf");
        for k in EngineKind::ALL {
            let e = match open(k, missing, &EngineConfig::default()) {
                Ok(_) => panic!("{k}: opened a file that does not exist"),
                Err(e) => e,
            };
            let msg = e.to_string();
            if k.is_built() {
                assert!(!matches!(e, EngineError::NotBuilt(_)), "{k}: {msg}");
                assert!(msg.contains("memwall-open-test.gguf"), "{k}: {msg}");
            } else {
                assert!(
                    matches!(e, EngineError::NotBuilt(n) if n == k),
                    "{k}: {msg}"
                );
                assert!(
                    msg.starts_with(&format!("{k}: this memwall was built without")),
                    "{msg}"
                );
            }
        }
        assert_eq!(
            EngineKind::Mlx8bit.not_built(),
            "mlx-8bit: this memwall was built without the MLX engine: run scripts/setup-mlx.sh, then build with `--features mlx`"
        );
    }

    /// The reuse rule on a real model: llama.cpp makes a context per configuration
    /// (each asked-for context length is the context's); MLX's engine, loaded at the
    /// sizing, serves a configuration that fits it (its cache cleared) and is loaded
    /// again for one that does not. The vocabulary is the same llama.cpp table for
    /// both.
    #[cfg(feature = "mlx")]
    #[test]
    fn a_model_reuses_what_its_engine_can() {
        use crate::measure::engine::Vocab;
        let Some(path) = crate::testing::model("smollm2-135m-q4_1") else {
            return;
        };
        let _lock = crate::testing::engine_lock();
        let cfg = |n_ctx| EngineConfig {
            n_ctx,
            n_batch: 64,
            n_ubatch: 64,
            n_threads: 2,
            n_threads_batch: 2,
            n_gpu_layers: 0,
            ..Default::default()
        };
        let mut llama = Model::load(EngineKind::Llama, &path, &cfg(512)).unwrap();
        for n_ctx in [256, 512] {
            assert_eq!(llama.engine(&cfg(n_ctx)).unwrap().n_ctx(), n_ctx);
        }
        let mut mlx = Model::load(EngineKind::Mlx4bit, &path, &cfg(256)).unwrap();
        let e = mlx.engine(&cfg(128)).unwrap();
        assert_eq!(e.n_ctx(), 256, "the engine loaded at the sizing serves 128");
        e.prefill(&[1, 2, 3], 0, 0, false).unwrap();
        let e = mlx.engine(&cfg(256)).unwrap();
        // A cleared cache takes position 0 again (MLX refuses a gap or an overlap).
        e.decode_one(1, 0, 0).unwrap();
        assert_eq!(mlx.engine(&cfg(512)).unwrap().n_ctx(), 512, "loaded again");
        let owned = mlx.take_engine(&cfg(512)).unwrap();
        assert_eq!(owned.n_ctx(), 512);
        assert!(mlx.held.is_none(), "the held engine was handed over");
        let (a, b) = (llama.tokenizer(), mlx.tokenizer());
        assert_eq!(
            a.tokenize("fn main() {}", true).unwrap(),
            b.tokenize("fn main() {}", true).unwrap()
        );
    }
}
