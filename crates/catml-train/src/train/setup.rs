//! From a spec to a running trainer: files are read relative to the spec, every mistake becomes
//! a [`SpecError`] naming its key.

use std::path::{Path as FsPath, PathBuf};

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::spec::{
    DistanceSpec, ObjectSpec, OptimiserKind, OptimiserSpec, ScheduleKind, Spec, SpecError,
};
use super::{initialise, Columns, Dataset, EpochMetrics, Outputs, Table, TrainError, Trainer};
use crate::diagram::{Arrow, Diagram, DiagramError, Distance, Equation, Path, Supervised, Term};
use crate::optim::{Adam, Method, OptimError, Optimiser, Schedule, Sgd};
use crate::tensor::{DType, Params, TensorType};

/// A prepared run: the trainer, the epochs to reach and where to write.
#[derive(Debug, Clone)]
pub struct Run {
    pub trainer: Trainer,
    pub epochs: usize,
    pub outputs: Outputs,
    /// The spec's `[distributed]` settings (used when run on several ranks).
    pub distributed: super::spec::DistributedSpec,
}

/// How to run a spec.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Draw the progress bar (only when stderr is a terminal).
    pub progress: bool,
    /// Continue from the spec's checkpoint if it exists.
    pub resume: bool,
}

/// Reads, prepares and runs a spec file; returns the last epoch's metrics.
pub fn run_spec(path: &FsPath, options: RunOptions) -> Result<EpochMetrics, TrainError> {
    run_spec_with_outputs(path, options).map(|(last, _)| last)
}

/// Reads, prepares and runs a spec file; returns the last epoch's metrics and where the run
/// wrote its outputs. A resumed run must be the run its checkpoint was written by: the same
/// settings and the same files (see [`Provenance`](super::Provenance)).
pub fn run_spec_with_outputs(
    path: &FsPath,
    options: RunOptions,
) -> Result<(EpochMetrics, Outputs), TrainError> {
    run_spec_on(path, options, None).map(|(last, outputs, _)| (last, outputs))
}

/// [`run_spec_with_outputs`] as one of the ranks of `comm` (see [`Trainer::distributed`]) when
/// given; also returns the communication figures. Only rank 0 creates output folders and writes
/// files.
pub fn run_spec_on(
    path: &FsPath,
    options: RunOptions,
    comm: Option<std::rc::Rc<dyn super::distributed::Collective>>,
) -> Result<(EpochMetrics, Outputs, Option<super::distributed::CommStats>), TrainError> {
    let in_spec = |source| TrainError::Spec {
        path: path.display().to_string(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(|e| TrainError::Output {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let spec = Spec::parse(&text).map_err(in_spec)?;
    let base = path.parent().unwrap_or(FsPath::new("."));
    let mut run = prepare(&spec, base).map_err(in_spec)?;
    let provenance = super::Provenance::of_spec(&text, &spec, base)?;
    run.trainer = run.trainer.with_provenance(provenance);
    let rank = comm.as_ref().map_or(0, |c| c.rank());
    if let Some(c) = comm {
        c.set_timeout(std::time::Duration::from_secs_f64(run.distributed.timeout));
        run.trainer = run
            .trainer
            .distributed(c, run.distributed.deterministic)
            .map_err(|e| in_spec(SpecError::new("distributed.shards", e.to_string())))?;
    }
    for p in [
        &run.outputs.checkpoint,
        &run.outputs.metrics,
        &run.outputs.plot,
    ]
    .into_iter()
    .flatten()
    .filter(|_| rank == 0)
    {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| TrainError::Output {
                path: dir.display().to_string(),
                reason: e.to_string(),
            })?;
        }
    }
    if let Some(ckpt) = run.outputs.checkpoint.as_ref().filter(|_| options.resume) {
        if ckpt.exists() {
            run.trainer.resume(ckpt)?;
        }
    }
    run.trainer
        .run(run.epochs, &run.outputs, options.progress)?;
    let last = run
        .trainer
        .history()
        .last()
        .cloned()
        .ok_or(TrainError::Empty { which: "metrics" })?;
    let stats = run.trainer.comm_stats();
    Ok((last, run.outputs, stats))
}

fn resolve(base: &FsPath, p: &str) -> PathBuf {
    base.join(p)
}

/// A module written for one example (no batch dimension) is named as such, with the type it
/// should declare, before its first axis is misread as a batch size.
fn check_batched(
    key: &str,
    program: &crate::ir::Program,
    a: &super::spec::ArrowSpec,
    spec: &Spec,
    d: &Diagram,
) -> Result<(), SpecError> {
    let data = program.data_indices();
    if data.len() != 1 || program.outputs().len() != 1 {
        return Ok(()); // Arrow::new reports the interface.
    }
    let ends = [
        (
            "data input",
            &a.source,
            program.inputs()[data[0]].ty.clone(),
        ),
        ("output", &a.target, program.output_types().remove(0)),
    ];
    for (side, object, found) in ends {
        let Some(ty) = d.object_type(object) else {
            continue;
        };
        if ty.dims() == found.dims() {
            let mut dims = vec![spec.batch_size];
            dims.extend_from_slice(found.dims());
            return Err(SpecError::new(
                format!("{key}.module"),
                format!(
                    "the module is unbatched: its {side} {found} is one example of object \
                     \"{object}\"; give it a leading batch dimension of batch_size {}: {}",
                    spec.batch_size,
                    TensorType::new(found.dtype, dims)
                ),
            ));
        }
    }
    Ok(())
}

/// The message of a diagram error without its leading `<label>: `.
fn strip(e: &DiagramError, label: &str) -> String {
    let s = e.to_string();
    s.strip_prefix(&format!("{label}: "))
        .map(str::to_string)
        .unwrap_or(s)
}

fn object_type(key: &str, o: &ObjectSpec) -> Result<TensorType, SpecError> {
    let dtype = match o.dtype.as_deref() {
        None | Some("f32") => DType::F32,
        Some("f64") => DType::F64,
        Some(other) => {
            return Err(SpecError::new(
                format!("{key}.dtype"),
                format!("expected \"f32\" or \"f64\", found \"{other}\""),
            ))
        }
    };
    if o.shape.contains(&0) {
        return Err(SpecError::new(
            format!("{key}.shape"),
            format!("dimensions must be positive, found {:?}", o.shape),
        ));
    }
    if o.columns.is_some() && o.labels.is_some() {
        return Err(SpecError::new(key, "give columns or labels, not both"));
    }
    if o.labels.is_some() && o.shape.len() != 1 {
        return Err(SpecError::new(
            format!("{key}.shape"),
            format!("labels need a shape [classes], found {:?}", o.shape),
        ));
    }
    Ok(TensorType::new(dtype, o.shape.clone()))
}

fn path_of(arrows: &[String]) -> Path {
    Path::of(arrows)
}

fn distance(d: DistanceSpec) -> Distance {
    match d {
        DistanceSpec::SquaredError => Distance::SquaredError,
        DistanceSpec::Mse => Distance::Mse,
        DistanceSpec::CrossEntropy => Distance::CrossEntropy,
    }
}

/// Maps a term's diagram error to the key it concerns.
fn term_error(base: &str, loss_key: &str, label: &str, e: DiagramError) -> SpecError {
    let key = match &e {
        DiagramError::Path { side, source, .. } => {
            return SpecError::new(format!("{base}.{side}"), source.to_string())
        }
        DiagramError::CrossEntropyRank { .. } => format!("{base}.{loss_key}"),
        DiagramError::Weight { .. } => format!("{base}.weight"),
        DiagramError::Duplicate { .. } | DiagramError::InvalidName { .. } => {
            format!("{base}.name")
        }
        _ => base.to_string(),
    };
    SpecError::new(key, strip(&e, label))
}

fn optimiser(o: &OptimiserSpec, total_steps: u64) -> Result<Optimiser, SpecError> {
    let only = |field: &str, present: bool, who: &str| {
        if present {
            Err(SpecError::new(
                format!("optimiser.{field}"),
                format!("only {who} takes {field}"),
            ))
        } else {
            Ok(())
        }
    };
    let config = |e: OptimError| match e {
        OptimError::Config {
            field,
            value,
            reason,
        } => SpecError::new(
            format!("optimiser.{field}"),
            format!("{reason}, found {value}"),
        ),
        other => SpecError::new("optimiser", other.to_string()),
    };
    let method: Method = match o.kind {
        OptimiserKind::Sgd => {
            only("betas", o.betas.is_some(), "adam or adamw")?;
            only("eps", o.eps.is_some(), "adam or adamw")?;
            Sgd::new(o.lr)
                .momentum(o.momentum.unwrap_or(0.0))
                .nesterov(o.nesterov.unwrap_or(false))
                .weight_decay(o.weight_decay)
                .into()
        }
        OptimiserKind::Adam | OptimiserKind::Adamw => {
            only("momentum", o.momentum.is_some(), "sgd")?;
            only("nesterov", o.nesterov.is_some(), "sgd")?;
            let mut a = if o.kind == OptimiserKind::Adamw {
                Adam::adamw(o.lr, o.weight_decay)
            } else {
                Adam::new(o.lr).weight_decay(o.weight_decay)
            };
            if let Some([b1, b2]) = o.betas {
                a = a.betas(b1, b2);
            }
            if let Some(eps) = o.eps {
                a = a.eps(eps);
            }
            a.into()
        }
    };
    let mut opt = Optimiser::new(method).map_err(config)?;
    if let Some(s) = &o.schedule {
        let key = |f: &str| format!("optimiser.schedule.{f}");
        let allowed: &[&str] = match s.kind {
            ScheduleKind::Constant => &[],
            ScheduleKind::Step => &["every", "gamma"],
            ScheduleKind::Cosine => &["warmup", "total", "floor"],
        };
        let given = [
            ("every", s.every.is_some()),
            ("gamma", s.gamma.is_some()),
            ("warmup", s.warmup.is_some()),
            ("total", s.total.is_some()),
            ("floor", s.floor.is_some()),
        ];
        if let Some((f, _)) = given.iter().find(|(f, g)| *g && !allowed.contains(f)) {
            return Err(SpecError::new(
                key(f),
                format!("a {:?} schedule has no {f}", s.kind).to_lowercase(),
            ));
        }
        let schedule = match s.kind {
            ScheduleKind::Constant => Schedule::Constant,
            ScheduleKind::Step => Schedule::Step {
                every: s
                    .every
                    .ok_or_else(|| SpecError::new(key("every"), "a step schedule needs every"))?,
                gamma: s
                    .gamma
                    .ok_or_else(|| SpecError::new(key("gamma"), "a step schedule needs gamma"))?,
            },
            ScheduleKind::Cosine => Schedule::Cosine {
                warmup: s.warmup.unwrap_or(0),
                total: s.total.unwrap_or(total_steps),
                floor: s.floor.unwrap_or(0.0),
            },
        };
        opt = opt.with_schedule(schedule).map_err(config)?;
    }
    if let Some(c) = o.clip_norm {
        opt = opt.with_clip(c).map_err(config)?;
    }
    Ok(opt)
}

fn data(
    key: &str,
    base: &FsPath,
    file: &str,
    bindings: &[(String, Columns)],
    d: &Diagram,
) -> Result<Dataset, SpecError> {
    let table =
        Table::read_csv(&resolve(base, file)).map_err(|e| SpecError::new(key, e.to_string()))?;
    Dataset::new(&table, bindings, d).map_err(|e| match &e {
        TrainError::UnknownColumn { object, .. } | TrainError::ColumnCount { object, .. } => {
            let message = e.to_string();
            let prefix = format!("object \"{object}\": ");
            let field = if bindings
                .iter()
                .any(|(o, c)| o == object && matches!(c, Columns::Labels { .. }))
            {
                "labels"
            } else {
                "columns"
            };
            SpecError::new(
                format!("objects.{object}.{field}"),
                message
                    .strip_prefix(&prefix)
                    .unwrap_or(&message)
                    .to_string(),
            )
        }
        _ => SpecError::new(key, e.to_string()),
    })
}

/// Builds the diagram, data, optimiser and trainer a spec describes.
pub fn prepare(spec: &Spec, base: &FsPath) -> Result<Run, SpecError> {
    if spec.epochs == 0 {
        return Err(SpecError::new("epochs", "must be positive, found 0"));
    }
    if spec.batch_size == 0 {
        return Err(SpecError::new("batch_size", "must be positive, found 0"));
    }
    let mut d = Diagram::new();
    let mut bindings = Vec::new();
    for (name, o) in &spec.objects {
        let key = format!("objects.{name}");
        let ty = object_type(&key, o)?;
        d.object(name, ty.clone()).map_err(|e| match e {
            DiagramError::DType { expected, .. } => SpecError::new(
                format!("{key}.dtype"),
                format!(
                    "dtype {} differs from the other objects' {expected}: a diagram has one \
                     dtype, so give every object the same `dtype` (default \"f32\")",
                    ty.dtype
                ),
            ),
            e => SpecError::new(&key, strip(&e, &format!("object \"{name}\""))),
        })?;
        if let Some(columns) = &o.columns {
            bindings.push((name.clone(), Columns::Values(columns.clone())));
        }
        if let Some(column) = &o.labels {
            let classes = ty.dims()[0];
            bindings.push((
                name.clone(),
                Columns::Labels {
                    column: column.clone(),
                    classes,
                },
            ));
        }
    }

    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    rng.set_stream(1);
    for (name, a) in &spec.arrows {
        let key = format!("arrows.{name}");
        let label = format!("arrow \"{name}\"");
        for (end, object) in [("source", &a.source), ("target", &a.target)] {
            if d.object_type(object).is_none() {
                return Err(SpecError::new(
                    format!("{key}.{end}"),
                    format!("unknown object \"{object}\""),
                ));
            }
        }
        let program = super::read_module(&resolve(base, &a.module))
            .map_err(|e| SpecError::new(format!("{key}.module"), e.to_string()))?;
        check_batched(&key, &program, a, spec, &d)?;
        let (params, params_key) = match &a.params {
            Some(file) => (
                Params::load(&resolve(base, file))
                    .map_err(|e| SpecError::new(format!("{key}.params"), e.to_string()))?,
                format!("{key}.params"),
            ),
            None => (initialise(&program, &mut rng), format!("{key}.module")),
        };
        let arrow = Arrow::new(name, &a.source, &a.target, program, params).map_err(|e| {
            let k = match e {
                DiagramError::MissingParam { .. }
                | DiagramError::ExtraParam { .. }
                | DiagramError::ParamType { .. } => params_key.clone(),
                _ => format!("{key}.module"),
            };
            SpecError::new(k, strip(&e, &label))
        })?;
        if arrow.batch() != spec.batch_size {
            return Err(SpecError::new(
                format!("{key}.module"),
                format!(
                    "batch size {} differs from batch_size {}",
                    arrow.batch(),
                    spec.batch_size
                ),
            ));
        }
        d.arrow(arrow).map_err(|e| match e {
            DiagramError::ArrowType {
                object,
                expected,
                found,
                side,
                ..
            } if expected.dtype != found.dtype => SpecError::new(
                format!("{key}.module"),
                format!(
                    "the module's {side} is {found} but object \"{object}\" is {}: set \
                     `dtype = \"{}\"` on the objects (default \"f32\")",
                    expected.dtype, found.dtype
                ),
            ),
            e => SpecError::new(format!("{key}.module"), strip(&e, &label)),
        })?;
    }

    for (i, e) in spec.equations.iter().enumerate() {
        let base_key = format!("equations[{i}]");
        let name = e.name.clone().unwrap_or_else(|| format!("equation{i}"));
        let (mut left, mut right) = (path_of(&e.left), path_of(&e.right));
        let source_of = |p: &Path, side: &str| {
            d.resolve(p)
                .map(|ends| ends.source)
                .map_err(|err| SpecError::new(format!("{base_key}.{side}"), err.to_string()))
        };
        match (e.left.is_empty(), e.right.is_empty()) {
            (true, true) => {
                return Err(SpecError::new(&base_key, "both paths are empty"));
            }
            (true, false) => left = Path::identity(&source_of(&right, "right")?),
            (false, true) => right = Path::identity(&source_of(&left, "left")?),
            (false, false) => {}
        }
        let eq = Equation::new(&name, left, right)
            .weight(e.weight)
            .distance(distance(e.distance));
        d.equation(eq).map_err(|err| {
            term_error(&base_key, "distance", &format!("equation \"{name}\""), err)
        })?;
    }
    for (i, s) in spec.supervised.iter().enumerate() {
        let base_key = format!("supervised[{i}]");
        let name = s.name.clone().unwrap_or_else(|| format!("supervised{i}"));
        let term = Supervised::new(&name, path_of(&s.path))
            .weight(s.weight)
            .loss(distance(s.loss));
        d.supervised(term)
            .map_err(|err| term_error(&base_key, "loss", &format!("supervised \"{name}\""), err))?;
    }
    if d.terms().is_empty() {
        return Err(SpecError::new(
            "spec",
            "no equations and no supervised terms: nothing to train",
        ));
    }
    // Every object a term reads needs columns.
    let bound = |o: &str| bindings.iter().any(|(b, _)| b == o);
    let (mut n_eq, mut n_sup) = (0, 0);
    for t in d.terms() {
        let (key, objects) = match t {
            Term::Equation(e) => {
                n_eq += 1;
                let ends = d.resolve(&e.left).expect("checked");
                (format!("equations[{}].left", n_eq - 1), vec![ends.source])
            }
            Term::Supervised(s) => {
                n_sup += 1;
                let ends = d.resolve(&s.path).expect("checked");
                (
                    format!("supervised[{}].path", n_sup - 1),
                    vec![ends.source, ends.target],
                )
            }
        };
        if let Some(o) = objects.iter().find(|o| !bound(o)) {
            return Err(SpecError::new(
                key,
                format!("object \"{o}\" has no columns or labels"),
            ));
        }
    }

    let train = data("data.train", base, &spec.data.train, &bindings, &d)?;
    if train.n_rows() == 0 {
        return Err(SpecError::new("data.train", "the file has no rows"));
    }
    let held_out = match &spec.data.held_out {
        Some(f) => Some(data("data.held_out", base, f, &bindings, &d)?),
        None => None,
    };
    let steps = (spec.epochs * train.n_rows().div_ceil(spec.batch_size)) as u64;
    let opt = optimiser(&spec.optimiser, steps)?;
    let params = d.params();
    let probes: Vec<(String, Path)> = spec
        .evaluate
        .iter()
        .map(|p| (p.name.clone(), path_of(&p.path)))
        .collect();
    let unexpected = |e: TrainError| SpecError::new("spec", e.to_string());
    let mut trainer = Trainer::new(d, params, opt, train, spec.seed).map_err(unexpected)?;
    if let Some(h) = held_out {
        if h.n_rows() == 0 {
            return Err(SpecError::new("data.held_out", "the file has no rows"));
        }
        trainer = trainer.with_held_out(h).map_err(unexpected)?;
    }
    for (i, (name, path)) in probes.iter().enumerate() {
        trainer.probe(name, path).map_err(|e| match e {
            TrainError::Probe {
                source: DiagramError::Path { source, .. },
                ..
            } => SpecError::new(format!("evaluate[{i}].path"), source.to_string()),
            other => SpecError::new(format!("evaluate[{i}]"), other.to_string()),
        })?;
    }
    if let Some(k) = spec.distributed.shards {
        trainer = trainer
            .with_shards(k)
            .map_err(|e| SpecError::new("distributed.shards", e.to_string()))?;
    }
    let d = &spec.distributed;
    if !(d.timeout.is_finite() && d.timeout > 0.0) {
        return Err(SpecError::new(
            "distributed.timeout",
            format!("must be a positive number of seconds, found {}", d.timeout),
        ));
    }
    let out = |p: &Option<String>| p.as_deref().map(|p| resolve(base, p));
    Ok(Run {
        trainer,
        epochs: spec.epochs,
        outputs: Outputs {
            checkpoint: out(&spec.output.checkpoint),
            metrics: out(&spec.output.metrics),
            plot: out(&spec.output.plot),
            plot_scale: spec.output.plot_scale,
        },
        distributed: spec.distributed.clone(),
    })
}
