//! `memwall mlx generate`'s job: the MLX engine's pipelined greedy decode timed as
//! mlx-lm's `generate_step` is (tg N after the GGUF's BOS id), the peer's measure
//! in bench/vs_mlx_lm.py.

#[cfg(feature = "mlx")]
pub use crate::measure::engine::mlx::GreedyTiming;

/// Loads `model` as the MLX arm `engine` (`mlx-4bit`, `mlx-8bit`, `mlx-f16`) and
/// times `reps` pipelined greedy generations of `n_gen` tokens after the first.
///
/// # Errors
/// [`EngineError::Setup`](crate::measure::engine::EngineError::Setup) for an arm
/// that is not MLX's; a load or decode error naming the file.
#[cfg(feature = "mlx")]
pub fn generate_job(
    model: &std::path::Path,
    engine: &str,
    n_gen: usize,
    reps: usize,
) -> Result<GreedyTiming, crate::measure::engine::EngineError> {
    use crate::measure::engine::EngineError;
    use crate::measure::engine::mlx::{MlxEngine, MlxQuant, start_token, time_greedy};
    let quant = MlxQuant::from_name(engine).ok_or_else(|| {
        EngineError::Setup(format!(
            "--engine {engine:?}: not an MLX arm; give mlx-4bit, mlx-8bit or mlx-f16"
        ))
    })?;
    let mut e = MlxEngine::load(model, quant, n_gen as u32 + 16, 512)?;
    let start = start_token(model)?;
    time_greedy(&mut e, &[start], n_gen, reps)
}
