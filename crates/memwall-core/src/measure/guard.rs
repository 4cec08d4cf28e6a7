//! The guard every measuring command runs under (bench, spec gate/bench,
//! perplexity, frontier, kv verify, chat): one place decides whether a measurement
//! may start and what the machine did while it ran.
//!
//! - **Battery**: refused unless the user allows it (`--allow-battery`): laptops
//!   lower CPU/GPU clocks and memory bandwidth on battery.
//! - **Capacity**: weights + KV cache + headroom must fit in the memory the OS says
//!   is available ([`check_fit`]). A reading of 0 available bytes means the probe
//!   failed, not that nothing is free: the check fails closed
//!   ([`GuardError::NoMemoryReading`]) unless skipped (`--skip-capacity-check`).
//! - **Thermal state and swap-outs**, sampled at [`Guard::begin`] and at
//!   [`Guard::finish`]: throttling and pages swapped out in between become warnings.
//!
//! [`Guard::finish`] returns a [`GuardReport`], stored as the run's `guard_json`
//! (bench rows also carry the same findings per test in their own columns).
//!
//! ```
//! use memwall_core::measure::guard::{Guard, GuardOptions};
//! use memwall_core::probe::hw::{LiveState, MemState, PowerSource, Thermal, ThermalState};
//! use memwall_core::units::Bytes;
//! let live = |swapped, state| LiveState {
//!     power: PowerSource::Ac,
//!     thermal: Thermal { state, max_celsius: None },
//!     mem: MemState { total: Bytes(8 << 30), available: Bytes(4 << 30), swap_total: Bytes(0), swap_used: Bytes(0) },
//!     swap_out_pages: Some(swapped),
//! };
//! let g = Guard::begin_at(live(100, ThermalState::Nominal), GuardOptions::default()).unwrap();
//! let r = g.finish_at(live(130, ThermalState::Throttling));
//! assert_eq!(r.swap_out_pages, Some(30));
//! assert_eq!(r.warnings.len(), 2); // swapping, thermal
//! ```

use crate::measure::warning::Warning;
use crate::probe::hw::{self, LiveState, ThermalState};
use crate::probe::model::{CacheType, ModelFacts};
use crate::roofline;
use crate::units::Bytes;
use serde::{Deserialize, Serialize};

/// What the user allowed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardOptions {
    /// Measure on battery power (`--allow-battery`); findings say so.
    #[serde(default)]
    pub allow_battery: bool,
    /// Do not check that the models fit in available memory (`--skip-capacity-check`).
    #[serde(default)]
    pub skip_capacity_check: bool,
}

/// Why a measurement may not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// Running on battery without `--allow-battery`.
    #[error(
        "refusing to record on battery power ({0}): laptops lower CPU/GPU clocks and memory bandwidth on battery, so the numbers would not describe this machine. Plug in, or pass --allow-battery (rows are then marked 'battery')"
    )]
    OnBattery(String),
    /// The models do not fit in available memory.
    #[error(
        "{model}: needs {needed} (weights {weights} + KV cache {kv} for {n_ctx} tokens + headroom {headroom}) but only {available} is available. Close other programs, use a smaller quantization, or lower -p/-n/-d"
    )]
    DoesNotFit {
        /// Model path(s), ` + `-joined.
        model: String,
        /// Total needed.
        needed: Bytes,
        weights: Bytes,
        /// KV cache.
        kv: Bytes,
        /// Context tokens (the largest of the models').
        n_ctx: u64,
        headroom: Bytes,
        /// Available memory.
        available: Bytes,
    },
    /// The OS reported 0 bytes of available memory: the fit cannot be checked.
    #[error(
        "{model}: cannot check that it fits in memory: the OS reports 0 bytes available (MemAvailable / the memory probe gave no reading), and the run needs {needed}. Pass --skip-capacity-check to measure anyway (the run records that the check was skipped)"
    )]
    NoMemoryReading {
        /// Model path(s).
        model: String,
        /// What the run needs.
        needed: Bytes,
    },
}

/// One capacity check, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityFinding {
    /// Model path(s), ` + `-joined.
    pub model: String,
    /// Weights + KV cache + headroom, bytes.
    pub needed_bytes: u64,
    /// Available memory read at the check, bytes.
    pub available_bytes: u64,
    /// `true` when `--skip-capacity-check` let the run start unchecked.
    pub skipped: bool,
}

/// What the guard saw: stored as the run's `guard_json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardReport {
    /// `ac`, `battery` or `unknown` at the start.
    pub power_before: String,
    /// `ac`, `battery` or `unknown` at the end.
    pub power_after: String,
    /// Thermal label at the start (`nominal 54.0C`, `unknown`).
    pub thermal_before: String,
    /// Thermal label at the end.
    pub thermal_after: String,
    /// Pages swapped out in between (`None`: the OS does not report the counter).
    pub swap_out_pages: Option<u64>,
    /// The capacity checks made.
    pub capacity: Vec<CapacityFinding>,
    /// What the user allowed.
    pub options: GuardOptions,
    /// Readable warnings (battery, swapping, thermal, skipped capacity check).
    pub warnings: Vec<String>,
}

impl GuardReport {
    /// One line for reports: power, thermal and swap-outs before → after, and the
    /// warnings.
    pub fn line(&self) -> String {
        format!(
            "guard: power {} → {}, thermal {} → {}, pages swapped out {}; {}",
            self.power_before,
            self.power_after,
            self.thermal_before,
            self.thermal_after,
            self.swap_out_pages
                .map_or("— (not reported by the OS)".into(), |p| p.to_string()),
            if self.warnings.is_empty() {
                "no warnings".to_string()
            } else {
                format!("warnings: {}", self.warnings.join("; "))
            }
        )
    }
}

/// What the guard found between two samples of the live state ([`findings`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Findings {
    /// The caveats, in the order a row shows them.
    pub warnings: Vec<Warning>,
    /// Pages swapped out in between (`None`: the OS does not report the counter).
    pub swap_out_pages: Option<u64>,
}

/// Warnings and swap-outs between two samples of the live state (the per-test part
/// of the guard, used by bench rows too): battery, pages swapped out, a thermal state
/// that was throttling or critical at either end.
pub fn findings(before: &LiveState, after: &LiveState) -> Findings {
    let mut warnings = Vec::new();
    if before.power.on_battery() || after.power.on_battery() {
        warnings.push(Warning::OnBattery);
    }
    let swapped = match (before.swap_out_pages, after.swap_out_pages) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    if let Some(p) = swapped.filter(|&p| p > 0) {
        warnings.push(Warning::Swapping { pages: p });
    }
    for th in [&before.thermal, &after.thermal] {
        if matches!(th.state, ThermalState::Throttling | ThermalState::Critical) {
            warnings.push(Warning::Thermal { state: th.label() });
            break;
        }
    }
    Findings {
        warnings,
        swap_out_pages: swapped,
    }
}

/// Refuses to run on battery unless allowed.
///
/// # Errors
/// [`GuardError::OnBattery`].
pub fn check_power(live: &LiveState, allow_battery: bool) -> Result<(), GuardError> {
    if live.power.on_battery() && !allow_battery {
        return Err(GuardError::OnBattery(live.power.to_string()));
    }
    Ok(())
}

/// Checks that `models` (each with the context it will hold) fit together in
/// `available` bytes: Σ weights + Σ KV cache (`cache` type) + the default headroom
/// of the summed weights ([`roofline::default_headroom`]).
///
/// # Errors
/// [`GuardError::DoesNotFit`] naming every number; [`GuardError::NoMemoryReading`]
/// when `available` is 0 and `skip` is not set.
pub fn check_fit(
    models: &[(&ModelFacts, u64)],
    cache: CacheType,
    available: Bytes,
    skip: bool,
) -> Result<CapacityFinding, GuardError> {
    let weights = Bytes(models.iter().map(|(f, _)| f.tensor_bytes.0).sum());
    let kv = Bytes(
        models
            .iter()
            .map(|(f, n)| f.kv_bytes_per_token(cache).0.saturating_mul(*n))
            .fold(0u64, u64::saturating_add),
    );
    let c = roofline::Capacity {
        weights,
        kv,
        headroom: roofline::default_headroom(weights),
        available,
    };
    let model = models
        .iter()
        .map(|(f, _)| f.path.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    let finding = CapacityFinding {
        model: model.clone(),
        needed_bytes: c.needed().0,
        available_bytes: available.0,
        skipped: skip,
    };
    if skip {
        return Ok(finding);
    }
    if available.0 == 0 {
        return Err(GuardError::NoMemoryReading {
            model,
            needed: c.needed(),
        });
    }
    if !c.fits() {
        return Err(GuardError::DoesNotFit {
            model,
            needed: c.needed(),
            weights: c.weights,
            kv: c.kv,
            n_ctx: models.iter().map(|(_, n)| *n).max().unwrap_or(0),
            headroom: c.headroom,
            available: c.available,
        });
    }
    Ok(finding)
}

/// A measurement in progress: the live state at its start, the options and the
/// capacity checks made so far.
#[derive(Debug, Clone)]
pub struct Guard {
    before: LiveState,
    options: GuardOptions,
    capacity: Vec<CapacityFinding>,
}

impl Guard {
    /// Samples the live state and refuses battery power unless allowed.
    ///
    /// # Errors
    /// [`GuardError::OnBattery`].
    pub fn begin(options: GuardOptions) -> Result<Guard, GuardError> {
        Guard::begin_at(hw::live_state(), options)
    }

    /// [`Guard::begin`] from a given sample (tests, or a caller that already has one).
    ///
    /// # Errors
    /// [`GuardError::OnBattery`].
    pub fn begin_at(before: LiveState, options: GuardOptions) -> Result<Guard, GuardError> {
        check_power(&before, options.allow_battery)?;
        Ok(Guard {
            before,
            options,
            capacity: Vec::new(),
        })
    }

    /// The options the guard runs with.
    pub fn options(&self) -> GuardOptions {
        self.options
    }

    /// Checks that `models` fit in the memory available now ([`check_fit`]) and
    /// records the finding.
    ///
    /// # Errors
    /// As [`check_fit`].
    pub fn check_fit(
        &mut self,
        models: &[(&ModelFacts, u64)],
        cache: CacheType,
    ) -> Result<(), GuardError> {
        self.check_fit_at(models, cache, hw::available_memory())
    }

    /// [`Guard::check_fit`] against a given reading of available memory.
    ///
    /// # Errors
    /// As [`check_fit`].
    pub fn check_fit_at(
        &mut self,
        models: &[(&ModelFacts, u64)],
        cache: CacheType,
        available: Bytes,
    ) -> Result<(), GuardError> {
        let f = check_fit(models, cache, available, self.options.skip_capacity_check)?;
        self.capacity.push(f);
        Ok(())
    }

    /// Samples the live state again and reports.
    pub fn finish(self) -> GuardReport {
        let after = hw::live_state();
        self.finish_at(after)
    }

    /// [`Guard::finish`] with a given end sample.
    pub fn finish_at(self, after: LiveState) -> GuardReport {
        let Findings {
            warnings: ws,
            swap_out_pages: swapped,
        } = findings(&self.before, &after);
        let mut warnings: Vec<String> = ws.iter().map(|w| w.to_string()).collect();
        for c in self.capacity.iter().filter(|c| c.skipped) {
            warnings.push(format!(
                "capacity: not checked for {} (--skip-capacity-check)",
                c.model
            ));
        }
        GuardReport {
            power_before: self.before.power.label().into(),
            power_after: after.power.label().into(),
            thermal_before: self.before.thermal.label(),
            thermal_after: after.thermal.label(),
            swap_out_pages: swapped,
            capacity: self.capacity,
            options: self.options,
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::hw::{MemState, PowerSource, Thermal};

    fn live(power: PowerSource, state: ThermalState, swapped: Option<u64>) -> LiveState {
        LiveState {
            power,
            thermal: Thermal {
                state,
                max_celsius: None,
            },
            mem: MemState {
                total: Bytes(8 << 30),
                available: Bytes(4 << 30),
                swap_total: Bytes(0),
                swap_used: Bytes(0),
            },
            swap_out_pages: swapped,
        }
    }

    /// A 1-layer model of 2,560 weight bytes whose KV cache is 256 B/token at F16
    /// (4 KV heads × (16 + 16) dims × 2 B).
    fn facts(name: &str) -> ModelFacts {
        crate::probe::model::one_layer_test_facts(name)
    }

    #[test]
    fn battery_is_refused_unless_allowed() {
        let b = live(
            PowerSource::Battery {
                percent: Some(50.0),
            },
            ThermalState::Unknown,
            None,
        );
        let e = Guard::begin_at(b.clone(), GuardOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("refusing to record on battery power (battery (50%))")
                && e.contains("--allow-battery"),
            "{e}"
        );
        let opts = GuardOptions {
            allow_battery: true,
            ..Default::default()
        };
        let r = Guard::begin_at(b.clone(), opts).unwrap().finish_at(b);
        assert_eq!(
            (r.power_before.as_str(), r.power_after.as_str()),
            ("battery", "battery")
        );
        assert_eq!(
            r.warnings,
            ["battery: measured on battery power (--allow-battery)"]
        );
        // Unknown power is not battery: no refusal, no warning.
        let u = live(PowerSource::Unknown, ThermalState::Unknown, None);
        let r = Guard::begin_at(u.clone(), GuardOptions::default())
            .unwrap()
            .finish_at(u);
        assert_eq!(r.power_after, "unknown");
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn thermal_and_swap_are_compared_before_and_after() {
        let g = Guard::begin_at(
            live(PowerSource::Ac, ThermalState::Nominal, Some(1000)),
            GuardOptions::default(),
        )
        .unwrap();
        let r = g.finish_at(live(PowerSource::Ac, ThermalState::Critical, Some(1250)));
        assert_eq!(r.swap_out_pages, Some(250));
        assert_eq!(r.thermal_before, "nominal");
        assert_eq!(r.thermal_after, "critical");
        assert_eq!(
            r.warnings,
            [
                "swapping: 250 pages swapped out during the test (a disk measurement)",
                "thermal: critical"
            ]
        );
        // A counter the OS does not report stays unknown, not 0.
        let g = Guard::begin_at(
            live(PowerSource::Ac, ThermalState::Nominal, None),
            GuardOptions::default(),
        )
        .unwrap();
        let r = g.finish_at(live(PowerSource::Ac, ThermalState::Nominal, Some(5)));
        assert_eq!(r.swap_out_pages, None);
        assert!(r.warnings.is_empty());
        let json = serde_json::to_value(&r).unwrap();
        assert!(json["swap_out_pages"].is_null());
    }

    #[test]
    fn capacity_fails_closed_on_a_zero_reading() {
        let f = facts("m.gguf");
        // 2,560 B weights + 256 B/token × 4,096 tokens (1 MiB) + 1 GiB + 256 B headroom.
        let needed = 2560 + (256 << 12) + (1 << 30) + 256;
        let mut g = Guard::begin_at(
            live(PowerSource::Ac, ThermalState::Nominal, Some(0)),
            GuardOptions::default(),
        )
        .unwrap();
        let e = g
            .check_fit_at(&[(&f, 4096)], CacheType::F16, Bytes(0))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "m.gguf: cannot check that it fits in memory: the OS reports 0 bytes available"
            ) && e.contains("--skip-capacity-check"),
            "{e}"
        );
        g.check_fit_at(&[(&f, 4096)], CacheType::F16, Bytes(needed))
            .unwrap();
        let e = g
            .check_fit_at(&[(&f, 4096)], CacheType::F16, Bytes(needed - 1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("m.gguf: needs ") && e.contains("is available"),
            "{e}"
        );
        let r = g.finish_at(live(PowerSource::Ac, ThermalState::Nominal, Some(0)));
        assert_eq!(
            r.capacity,
            [CapacityFinding {
                model: "m.gguf".into(),
                needed_bytes: needed,
                available_bytes: needed,
                skipped: false
            }]
        );
        // The override lets it start, and says so.
        let mut g = Guard::begin_at(
            live(PowerSource::Ac, ThermalState::Nominal, Some(0)),
            GuardOptions {
                skip_capacity_check: true,
                ..Default::default()
            },
        )
        .unwrap();
        g.check_fit_at(&[(&f, 4096)], CacheType::F16, Bytes(0))
            .unwrap();
        let r = g.finish_at(live(PowerSource::Ac, ThermalState::Nominal, Some(0)));
        assert!(r.capacity[0].skipped);
        assert_eq!(
            r.warnings,
            ["capacity: not checked for m.gguf (--skip-capacity-check)"]
        );
    }

    #[test]
    fn models_loaded_together_are_checked_together() {
        let (t, d) = (facts("target.gguf"), facts("draft.gguf"));
        // Σ weights 5,120 + Σ KV 256 × (1,000 + 1,000) + 1 GiB + 512 B headroom.
        let needed = 5120 + 256 * 2000 + (1 << 30) + 512;
        let e = check_fit(
            &[(&t, 1000), (&d, 1000)],
            CacheType::F16,
            Bytes(needed - 1),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("target.gguf + draft.gguf: needs ") && e.contains("for 1000 tokens"),
            "{e}"
        );
        let ok = check_fit(
            &[(&t, 1000), (&d, 1000)],
            CacheType::F16,
            Bytes(needed),
            false,
        )
        .unwrap();
        assert_eq!(ok.needed_bytes, needed);
    }
}
