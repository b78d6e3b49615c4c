//! `mpirun -n N catml train`: 1, 2 and 3 ranks give the same bits as one process (triangle
//! spec, digits CNN), uneven shards included; the all-reduce mode stays within rounding; a
//! killed rank or a hung rank stops the job within the stated time; resuming on another rank
//! count continues exactly. Needs `mpirun` (Open MPI) on the path.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::mpi_specs as specs;
use catml::tensor::{Params, Tensor};

const CATML: &str = env!("CARGO_BIN_EXE_catml");

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("catml-mpi-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mpirun(n: usize) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &n.to_string(),
    ])
    .args([
        "--mca",
        "btl",
        "self,vader,tcp",
        "--mca",
        "btl_tcp_if_include",
        "lo",
    ])
    // One thread per rank: several ranks share two cores.
    .args(["-x", "RAYON_NUM_THREADS=1", CATML]);
    c
}

/// Waits at most `limit` for `child`; a job still running then is killed and the test fails.
fn finish(mut child: Child, limit: Duration) -> (Output, Duration) {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return (child.wait_with_output().unwrap(), start.elapsed());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run(mut c: Command) -> Output {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, _) = finish(child, Duration::from_secs(240));
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Trains `spec` on `ranks` ranks (0: one process without mpirun); returns stdout.
fn train(spec: &Path, ranks: usize, resume: bool) -> String {
    let mut c = if ranks == 0 {
        Command::new(CATML)
    } else {
        mpirun(ranks)
    };
    c.args(["train", "--quiet"]).arg(spec);
    if resume {
        c.arg("--resume");
    }
    String::from_utf8(run(c).stdout).unwrap()
}

/// Every tensor of a checkpoint (parameters and optimiser state) and its epoch.
fn checkpoint(path: &Path) -> (Params, String) {
    let bytes = std::fs::read(path).unwrap();
    let (p, meta) = Params::from_safetensors_with_metadata(&bytes).unwrap();
    (p, meta["epoch"].clone())
}

fn bits(t: &Tensor) -> Vec<u64> {
    match t {
        Tensor::F32(a) => a.data().iter().map(|x| x.to_bits() as u64).collect(),
        Tensor::F64(a) => a.data().iter().map(|x| x.to_bits()).collect(),
        Tensor::I64(a) => a.data().iter().map(|&x| x as u64).collect(),
        Tensor::Bool(a) => a.data().iter().map(|&x| x as u64).collect(),
        Tensor::Stored(s) => s.to_le_bytes().into_iter().map(u64::from).collect(),
    }
}

fn assert_same_bits(a: &Params, b: &Params, what: &str) {
    let names: Vec<&str> = a.names().collect();
    assert_eq!(names, b.names().collect::<Vec<_>>(), "{what}");
    for n in names {
        assert!(
            bits(a.get(n).unwrap()) == bits(b.get(n).unwrap()),
            "{what}: `{n}` differs (max |diff| {})",
            a.get(n).unwrap().max_abs_diff(b.get(n).unwrap())
        );
    }
}

/// Largest |a - b| and largest distance in units in the last place over the parameters.
fn rounding(a: &Params, b: &Params) -> (f64, u64) {
    let (mut abs, mut ulp) = (0.0f64, 0u64);
    for (n, t) in a.iter().filter(|(n, _)| n.starts_with("param/")) {
        let u = b.get(n).unwrap();
        abs = abs.max(t.max_abs_diff(u));
        if let (Tensor::F32(x), Tensor::F32(y)) = (t, u) {
            for (p, q) in x.data().iter().zip(y.data()) {
                let key = |v: f32| {
                    let b = v.to_bits() as i64;
                    if b < 0 {
                        i32::MIN as i64 - b
                    } else {
                        b
                    }
                };
                ulp = ulp.max(key(*p).abs_diff(key(*q)));
            }
        }
    }
    (abs, ulp)
}

fn same_runs_on_1_2_3_ranks(dir: &Path, spec: &Path, ckpt: &Path) {
    let one = train(spec, 0, false);
    let (reference, _) = checkpoint(ckpt);
    for ranks in [1, 2, 3] {
        std::fs::remove_file(ckpt).unwrap();
        let out = train(spec, ranks, false);
        assert_eq!(out, one, "{ranks} ranks: final metrics");
        let (p, _) = checkpoint(ckpt);
        assert_same_bits(
            &reference,
            &p,
            &format!("{} on {ranks} ranks", dir.display()),
        );
    }
}

#[test]
fn triangle_on_1_2_and_3_ranks_equals_one_process_bit_for_bit() {
    let dir = scratch("triangle");
    // 32 rows in 3 pieces: 11, 11 and 10 rows; 2 ranks hold 1 and 2 pieces.
    let spec = specs::triangle(&dir, 1, 200, &specs::distributed(3, true, 30.0));
    let ckpt = dir.join("triangle/out/checkpoint.safetensors");
    same_runs_on_1_2_3_ranks(&dir, &spec, &ckpt);
    // The comparison sees the order of the additions: whole batches give other bits.
    let (pieces, _) = checkpoint(&ckpt);
    let whole = specs::triangle(&dir, 1, 200, "");
    train(&whole, 0, false);
    let (abs, ulp) = rounding(&pieces, &checkpoint(&ckpt).0);
    assert!(ulp > 0 && abs < 1e-4, "{abs} {ulp}");
}

#[test]
fn digits_cnn_on_1_2_and_3_ranks_equals_one_process_bit_for_bit() {
    let dir = scratch("digits");
    // 100 digits: 3 steps of 32 and a last batch of 4 rows (pieces 4, 0, 0).
    let spec = specs::digits(&dir, 32, 100, 1, &specs::distributed(3, true, 30.0));
    same_runs_on_1_2_3_ranks(&dir, &spec, &dir.join("out/checkpoint.safetensors"));
}

/// Trains `spec` on 3 ranks in piece order and with the all-reduce; returns the largest
/// parameter difference and ulp distance after its steps.
fn all_reduce_rounding(spec: impl Fn(bool) -> PathBuf, ckpt: &Path) -> (f64, u64) {
    train(&spec(true), 3, false);
    let (ordered, _) = checkpoint(ckpt);
    std::fs::remove_file(ckpt).unwrap();
    train(&spec(false), 3, false);
    let (summed, _) = checkpoint(ckpt);
    rounding(&ordered, &summed)
}

#[test]
fn all_reduce_differs_from_piece_order_only_by_rounding() {
    // 6 pieces on 3 ranks: each rank adds its two pieces before the all-reduce, an order
    // other than the left-to-right one.
    let dir = scratch("rounding");
    let ckpt = dir.join("triangle/out/checkpoint.safetensors");
    let spec = |det| specs::triangle(&dir, 1, 200, &specs::distributed(6, det, 30.0));
    let (abs, ulp) = all_reduce_rounding(spec, &ckpt);
    eprintln!("triangle, 50 steps, 6 pieces on 3 ranks: all-reduce vs piece order: max |diff| {abs:e}, {ulp} ulp");
    assert!(abs < 1e-4, "max |diff| {abs}");
    let dir = scratch("rounding-digits");
    let ckpt = dir.join("out/checkpoint.safetensors");
    let spec = |det| specs::digits(&dir, 32, 320, 1, &specs::distributed(6, det, 30.0));
    let (abs, ulp) = all_reduce_rounding(spec, &ckpt);
    eprintln!("digits CNN, 10 steps, 6 pieces on 3 ranks: all-reduce vs piece order: max |diff| {abs:e}, {ulp} ulp");
    assert!(abs < 1e-4, "max |diff| {abs}");
}

/// The pid of rank `rank` among mpirun's children.
fn rank_pid(mpirun: u32, rank: usize) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok());
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let wanted = format!("OMPI_COMM_WORLD_RANK={rank}");
        if ppid == Some(mpirun) && env.split(|&b| b == 0).any(|v| v == wanted.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

/// Starts `ranks` ranks on `spec`, waits for the first checkpoint, sends `signal` to rank 1
/// and returns the job's stderr and how long it took to stop after the signal.
fn interrupt(spec: &Path, ckpt: &Path, ranks: usize, signal: &str) -> (String, Duration) {
    let mut c = mpirun(ranks);
    c.args(["train", "--quiet"]).arg(spec);
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !ckpt.exists() {
        assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = rank_pid(child.id(), 1).expect("rank 1 runs");
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
    assert!(status.unwrap().success());
    let (out, took) = finish(child, Duration::from_secs(60));
    // A stopped process is not ended by mpirun's SIGTERM.
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .stderr(Stdio::null())
        .status();
    assert!(!out.status.success());
    (String::from_utf8_lossy(&out.stderr).into_owned(), took)
}

#[test]
fn a_killed_rank_stops_the_job_and_resuming_on_other_rank_counts_continues_exactly() {
    let dir = scratch("kill");
    let ckpt = dir.join("triangle/out/checkpoint.safetensors");
    let spec = specs::triangle(&dir, 40, 2000, &specs::distributed(3, true, 30.0));
    let (stderr, took) = interrupt(&spec, &ckpt, 3, "-KILL");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(
        stderr.contains("stopped by mpirun (another rank failed"),
        "{stderr}"
    );
    // Resume from the last checkpoint on 2 ranks, one epoch further.
    let (_, epoch) = checkpoint(&ckpt);
    let done: usize = epoch.parse().unwrap();
    let extra = specs::distributed(3, true, 30.0);
    let spec = specs::triangle(&dir, done + 1, 2000, &extra);
    let resumed_on_2 = train(&spec, 2, true);
    let (resumed, _) = checkpoint(&ckpt);
    // The same epochs from scratch in one process.
    let fresh = scratch("kill-reference");
    let spec = specs::triangle(&fresh, done + 1, 2000, &extra);
    let uninterrupted = train(&spec, 0, false);
    let (reference, _) = checkpoint(&fresh.join("triangle/out/checkpoint.safetensors"));
    assert_same_bits(&reference, &resumed, "resumed on 2 ranks");
    assert_eq!(resumed_on_2, uninterrupted);
}

#[test]
fn a_hung_rank_stops_the_job_after_the_timeout() {
    let dir = scratch("hang");
    let ckpt = dir.join("triangle/out/checkpoint.safetensors");
    let spec = specs::triangle(&dir, 40, 2000, &specs::distributed(2, true, 3.0));
    let (stderr, took) = interrupt(&spec, &ckpt, 2, "-STOP");
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(20),
        "took {took:?}"
    );
    assert!(
        stderr.contains("rank 0 of 2: no answer from the other ranks for 3 s"),
        "{stderr}"
    );
}
