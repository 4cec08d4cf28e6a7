//! The sampler's charts: a run's time series with its phases shaded and their timed
//! intervals shaded darker (power on top; temperature, else DRAM bandwidth, else GPU
//! memory utilisation, else the CPU time used by memwall and by other processes, else
//! a CPU clock that changes, below). A panel with nothing measured says "not
//! measured" and why, instead of drawing an empty axis. Tokens per joule against the
//! frontier's arms is [`crate::experiments::frontier::chart::tokens_per_joule_chart`].

use super::{Recording, Sample};
use crate::present::chart::{ChartError, ChartFiles, DrawResult, PALETTE, render_both};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

type Get = fn(&Sample) -> Option<f64>;

/// A series ready to draw: label and (time s, value) points.
type Points = (String, Vec<(f64, f64)>);

/// Power series: (label, getter).
const POWER: [(&str, Get); 3] = [
    ("CPU package W (RAPL)", |s| s.cpu_power_w),
    ("DRAM W (RAPL)", |s| s.dram_power_w),
    ("GPU W (NVML)", |s| s.gpu_power_w),
];

/// The lower panel's read-as-is candidates, first with data wins: (axis label, series).
const LOWER: [(&str, &[(&str, Get)]); 3] = [
    (
        "°C",
        &[("CPU °C", |s| s.cpu_temp_c), ("GPU °C", |s| s.gpu_temp_c)],
    ),
    ("GB/s", &[("DRAM GB/s (uncore)", |s| s.dram_gbps)]),
    (
        "%",
        &[
            ("GPU memory-controller %", |s| s.gpu_mem_util_pct),
            ("other processes' GPU SM %", |s| s.gpu_other_util_pct),
        ],
    ),
];

/// `(label, getter)` as points over `rec`'s reads.
fn points(rec: &Recording, series: &[(&str, Get)]) -> Vec<Points> {
    series
        .iter()
        .map(|(l, g)| {
            (
                l.to_string(),
                rec.samples
                    .iter()
                    .filter_map(|s| Some((s.t_ns as f64 / 1e9, g(s)?)))
                    .collect(),
            )
        })
        .filter(|(_, v): &Points| !v.is_empty())
        .collect()
}

/// CPU use between consecutive reads, cores: memwall's own (Δ own CPU time ÷ Δt),
/// other processes' ((Δ busy − Δ own) ÷ Δt) and the hypervisor's other guests'
/// (Δ steal ÷ Δt), each at the later read's time.
fn cpu_use(rec: &Recording) -> Vec<Points> {
    let mut own = Vec::new();
    let mut others = Vec::new();
    let mut steal = Vec::new();
    for w in rec.samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let dt = b.t_ns.saturating_sub(a.t_ns) as f64 / 1e9;
        if let (Some(b0), Some(b1), Some(o0), Some(o1), Some(s0), Some(s1)) = (
            a.cpu_busy_s,
            b.cpu_busy_s,
            a.own_cpu_s,
            b.own_cpu_s,
            a.cpu_steal_s,
            b.cpu_steal_s,
        ) && dt > 0.0
        {
            let t = b.t_ns as f64 / 1e9;
            own.push((t, (o1 - o0) / dt));
            others.push((t, ((b1 - b0) - (o1 - o0)).max(0.0) / dt));
            steal.push((t, (s1 - s0) / dt));
        }
    }
    if own.is_empty() {
        return Vec::new();
    }
    let mut v = vec![
        ("memwall, cores".to_string(), own),
        ("other processes, cores".to_string(), others),
    ];
    if steal.iter().any(|p| p.1 > 0.0) {
        v.push(("hypervisor steal, cores".to_string(), steal));
    }
    v
}

/// The CPU clock, only when it changed during the run (a VM's fixed nominal figure
/// is a flat line that says nothing).
fn clock_if_it_moves(rec: &Recording) -> Vec<Points> {
    let v = points(rec, &[("CPU MHz", |s| s.cpu_mhz)]);
    let moved = v.iter().any(|(_, p)| {
        let lo = p.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        let hi = p.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
        hi - lo > 1.0
    });
    if moved { v } else { Vec::new() }
}

fn reason_of(rec: &Recording, names: &[&str]) -> String {
    let r: Vec<String> = rec
        .counters
        .iter()
        .filter(|c| names.contains(&c.name.as_str()))
        .filter_map(|c| c.reason.clone())
        .fold(Vec::new(), |mut v, r| {
            if !v.contains(&r) {
                v.push(r);
            }
            v
        });
    if r.is_empty() {
        "no reads".into()
    } else {
        r.join("; ")
    }
}

fn not_measured<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    why: &str,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let (w, h) = area.dim_in_pixel();
    area.draw(&Text::new(
        format!("{title}: not measured"),
        (20, h as i32 / 2 - 20),
        ("sans-serif", 22),
    ))?;
    let mut why = why.to_string();
    if why.len() > 150 {
        why.truncate(
            why.char_indices()
                .take_while(|(i, _)| *i < 147)
                .last()
                .map_or(0, |(i, c)| i + c.len_utf8()),
        );
        why.push('…');
    }
    let _ = w;
    area.draw(&Text::new(why, (20, h as i32 / 2 + 10), ("sans-serif", 14)))?;
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    rec: &Recording,
    title: &str,
    unit: &str,
    pts: Vec<Points>,
) -> DrawResult<bool>
where
    DB::ErrorType: 'static,
{
    if pts.is_empty() {
        return Ok(false);
    }
    let t_max = rec
        .samples
        .last()
        .map_or(1.0, |s| s.t_ns as f64 / 1e9)
        .max(0.1);
    let y_max = pts
        .iter()
        .flat_map(|(_, v)| v.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        * 1.15
        + 1e-9;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("time, s")
        .y_desc(unit)
        .draw()?;
    for (i, p) in rec.phases.iter().enumerate() {
        let (a, b) = (p.start_ns as f64 / 1e9, p.end_ns as f64 / 1e9);
        let c = PALETTE[i % PALETTE.len()].mix(0.12);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(a, 0.0), (b, y_max)],
            c.filled(),
        )))?;
        // Staggered, so labels of adjacent short phases do not overprint.
        let y = y_max * (0.97 - 0.07 * (i % 3) as f64);
        chart.draw_series(std::iter::once(Text::new(
            p.name.clone(),
            (a, y),
            ("sans-serif", 12),
        )))?;
    }
    // The timed intervals (what energy is integrated over), darker within their phase.
    for iv in &rec.intervals {
        let i = rec
            .phases
            .iter()
            .position(|p| p.name == iv.phase)
            .unwrap_or(0);
        let c = PALETTE[i % PALETTE.len()].mix(0.25);
        chart.draw_series(std::iter::once(Rectangle::new(
            [
                (iv.start_ns as f64 / 1e9, 0.0),
                (iv.end_ns as f64 / 1e9, y_max * 0.9),
            ],
            c.filled(),
        )))?;
    }
    for (i, (label, v)) in pts.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(v.iter().copied(), c.stroke_width(2)))?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    crate::present::chart::draw_legend(&mut chart, SeriesLabelPosition::LowerRight, 13)?;
    Ok(true)
}

/// Draws `rec` on `root`: power on top, the first lower-panel quantity with data
/// below, phases shaded and named on both.
pub fn draw_series<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rec: &Recording,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(root.dim_in_pixel().1 / 2);
    if !panel(&top, rec, "Power during the run", "W", points(rec, &POWER))? {
        let why = reason_of(rec, &["cpu_package_energy", "dram_energy", "gpu_power"]);
        not_measured(&top, "Power", &why)?;
    }
    let mut lower: Vec<(String, String, Vec<Points>)> = LOWER
        .iter()
        .map(|(unit, series)| {
            (
                format!("Machine state ({unit})"),
                unit.to_string(),
                points(rec, series),
            )
        })
        .collect();
    lower.push((
        "CPU use: memwall and other processes".into(),
        "cores".into(),
        cpu_use(rec),
    ));
    lower.push((
        "Machine state (MHz)".into(),
        "MHz".into(),
        clock_if_it_moves(rec),
    ));
    let mut drawn = false;
    for (title, unit, pts) in lower {
        if panel(&bottom, rec, &title, &unit, pts)? {
            drawn = true;
            break;
        }
    }
    if !drawn {
        let why = reason_of(
            rec,
            &[
                "cpu_temperature",
                "dram_bandwidth",
                "gpu_temperature",
                "cpu_frequency",
                "cpu_time",
            ],
        );
        not_measured(&bottom, "Temperature, bandwidth and clock", &why)?;
    }
    root.present()?;
    Ok(())
}

/// Writes the time series of `rec` to `stem`.png and `stem`.svg.
///
/// # Errors
/// [`ChartError`] naming the file; [`ChartError::Empty`] for a recording with no reads.
pub fn series(stem: &Path, rec: &Recording) -> Result<ChartFiles, ChartError> {
    if rec.samples.is_empty() {
        return Err(ChartError::Empty("sampler time series"));
    }
    render_both(stem, |r| draw_series(r, rec), |r| draw_series(r, rec))
}

/// The time series of `rec` as an SVG string of `w` × `h` pixels (the app's
/// Machine page); an empty string when there are no reads.
///
/// # Errors
/// [`ChartError::Draw`].
pub fn series_svg(rec: &Recording, w: u32, h: u32) -> Result<String, ChartError> {
    if rec.samples.is_empty() {
        return Ok(String::new());
    }
    crate::present::chart::ensure_font();
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (w, h)).into_drawing_area();
        draw_series(&root, rec).map_err(|e| ChartError::Draw {
            path: "live series (SVG string)".into(),
            msg: e.to_string(),
        })?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::sampler::Counter;
    use crate::measure::sampler::session::Phase;

    fn svg(f: impl Fn(&DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult<()>) -> String {
        crate::present::chart::ensure_font();
        let mut s = String::new();
        {
            let root = SVGBackend::with_string(&mut s, (1000, 600)).into_drawing_area();
            f(&root).unwrap();
        }
        s
    }

    #[test]
    fn the_series_shades_phases_and_says_what_was_not_measured() {
        // A VM's reads: a fixed clock, and CPU times (the machine busy 2 cores,
        // memwall 1.5: other processes 0.5).
        let rec = Recording {
            hz: 10.0,
            samples: (0..20)
                .map(|i| Sample {
                    t_ns: i * 100_000_000,
                    cpu_mhz: Some(2600.0),
                    cpu_busy_s: Some(2.0 * i as f64 * 0.1),
                    own_cpu_s: Some(1.5 * i as f64 * 0.1),
                    cpu_steal_s: Some(0.0),
                    ..Sample::default()
                })
                .collect(),
            phases: vec![Phase {
                name: "#0 tg128".into(),
                start_ns: 300_000_000,
                end_ns: 1_500_000_000,
            }],
            intervals: Vec::new(),
            counters: vec![Counter::unavailable(
                "cpu_package_energy",
                "x",
                "RAPL not readable in this VM",
            )],
        };
        let s = svg(|r| draw_series(r, &rec));
        assert!(s.contains("Power: not measured"), "no power drawn");
        assert!(s.contains("RAPL not readable in this VM"));
        assert!(s.contains("#0 tg128"));
        // The share of other processes instead of the flat clock line.
        assert!(s.contains("other processes, cores"), "the share is drawn");
        assert!(
            !s.contains("CPU MHz"),
            "a clock that never moves is not drawn"
        );
        let use_ = cpu_use(&rec);
        assert_eq!(use_.len(), 2, "no steal series when nothing was stolen");
        assert!(use_[0].1.iter().all(|p| (p.1 - 1.5).abs() < 1e-9));
        assert!(use_[1].1.iter().all(|p| (p.1 - 0.5).abs() < 1e-9));
        // Without CPU times: a clock that moves is drawn; a flat one is not.
        let mut bare = rec.clone();
        for x in &mut bare.samples {
            (x.cpu_busy_s, x.own_cpu_s, x.cpu_steal_s) = (None, None, None);
        }
        let s = svg(|r| draw_series(r, &bare));
        assert!(
            s.contains("Temperature, bandwidth and clock: not measured"),
            "{s}"
        );
        bare.samples[5].cpu_mhz = Some(1800.0);
        let s = svg(|r| draw_series(r, &bare));
        assert!(s.contains("CPU MHz"));
        let d = tempfile::tempdir().unwrap();
        let f = series(&d.path().join("sampler"), &rec).unwrap();
        assert!(f.png.is_file() && f.svg.is_file());
        let empty = Recording {
            samples: vec![],
            ..rec
        };
        assert!(series(&d.path().join("e"), &empty).is_err());
    }
}
