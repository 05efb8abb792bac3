//! A GPT cut into two pipeline stages on 2 ranks under tools/ds-run:
//! `eval_batch` and two `train_batch` calls (the first stage given only the
//! inputs, the last only the targets) give, on both ranks, the losses of the
//! same GPT unsplit in this process (dropout 0: batch 0 exactly as the
//! unsplit forward up to fp32 summation order, rtol 1e-5; batch 1 after one
//! AdamW step whose gradients were summed in another order, rtol 1e-4), and
//! `pipe_info` describes the two stages.
//!
//! The test re-runs this binary on each rank (`pipeline_rank`, which does
//! nothing unless DS_RUST_PIPELINE_OUT is set); each rank writes its results
//! to a file. Skipped, saying so, where mpirun is missing.
use deepspeed_c::{Comm, Engine, Model, PipeInfo, Tensor};
use std::path::{Path, PathBuf};
use std::process::Command;

const MICRO: usize = 2;
const GAS: usize = 2;
const T: usize = 8;
const STEPS: usize = 2;
const N_LAYER: i32 = 2;
const CONFIG: &str = r#"{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}"#;

fn spec(extra: &str) -> String {
    format!(
        r#"{{"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16,
            "seed": 3, "dropout": 0.0{}}}"#,
        extra
    )
}

/// Token ids and next-token targets [GAS * MICRO, T] of batch `step`.
fn batch(step: usize) -> (Vec<i32>, Vec<i32>) {
    let seq: Vec<i32> = (0..GAS * MICRO * (T + 1)).map(|i| ((i * 7 + step * 5 + i / 3) % 16) as i32).collect();
    let (mut ids, mut tgt) = (Vec::new(), Vec::new());
    for row in seq.chunks(T + 1) {
        ids.extend_from_slice(&row[..T]);
        tgt.extend_from_slice(&row[1..]);
    }
    (ids, tgt)
}

fn info_line(p: &PipeInfo) -> String {
    format!(
        "{} {} {} {} {} {} {} {:?} {:?} {:?}",
        p.stage_id,
        p.num_stages,
        p.first_layer,
        p.last_layer,
        p.num_layers,
        p.micro_batches,
        p.data_parallel_size,
        p.batch_seconds,
        p.compute_seconds,
        p.recompute_seconds
    )
}

#[test]
fn pipeline_rank() {
    let out = match std::env::var_os("DS_RUST_PIPELINE_OUT") {
        Some(o) => PathBuf::from(o),
        None => return, // only meaningful under tools/ds-run
    };
    let world = Comm::world().unwrap();
    let rank = world.rank().unwrap();
    assert_eq!(world.size().unwrap(), 2);
    let model = Model::new(&spec(r#", "pipeline": {"stages": 2, "partition_method": "parameters"}"#)).unwrap();
    let mut e = Engine::builder().comm(&world).build_with_model(CONFIG, &model).unwrap();
    let before = e.pipe_info().unwrap();
    let first = before.stage_id == 0;
    let mut lines = vec![info_line(&before)];
    // call 0: eval_batch of batch 0; then train_batch of batches 0 .. STEPS-1
    for call in 0..=STEPS {
        let (ids, tgt) = batch(call.saturating_sub(1));
        let shape = [(GAS * MICRO) as i64, T as i64];
        let (x, y) = (Tensor::new(&ids, &shape).unwrap(), Tensor::new(&tgt, &shape).unwrap());
        let (x, y) = (if first { Some(&x) } else { None }, if first { None } else { Some(&y) });
        let loss = if call == 0 { e.eval_batch(x, y).unwrap() } else { e.train_batch(x, y).unwrap().loss };
        lines.push(format!("{:?}", loss));
    }
    lines.push(info_line(&e.pipe_info().unwrap()));
    lines.push(format!("{}", e.global_steps().unwrap()));
    std::fs::write(out.join(format!("rank{}.txt", rank)), lines.join("\n")).unwrap();
    drop(e);
    world.finalize().unwrap();
}

/// The unsplit GPT in this process: batch 0's eval loss, then per batch the
/// mean of its micro-batches' training losses, one optimizer step per batch.
fn unsplit_losses() -> Vec<f64> {
    let model = Model::new(&spec("")).unwrap();
    let mut e = Engine::with_model(CONFIG, &model).unwrap();
    let mean_over_micro = |e: &mut Engine, step: usize, train: bool| -> f64 {
        let (ids, tgt) = batch(step);
        let mut sum = 0f64;
        for m in 0..GAS {
            let rows = m * MICRO * T..(m + 1) * MICRO * T;
            let x = Tensor::new(&ids[rows.clone()], &[MICRO as i64, T as i64]).unwrap();
            let y = Tensor::new(&tgt[rows], &[MICRO as i64, T as i64]).unwrap();
            sum += e.forward_loss(&x, &y).unwrap() as f64;
            if train {
                e.backward().unwrap();
                e.step().unwrap();
            }
        }
        sum / GAS as f64
    };
    e.eval(true).unwrap();
    let mut losses = vec![mean_over_micro(&mut e, 0, false)];
    e.eval(false).unwrap();
    for step in 0..STEPS {
        losses.push(mean_over_micro(&mut e, step, true));
    }
    losses
}

fn read_rank(dir: &Path, r: usize) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join(format!("rank{}.txt", r)))
        .unwrap_or_else(|e| panic!("rank {} wrote no results: {}", r, e));
    text.lines().map(str::to_string).collect()
}

#[test]
fn two_stages_on_two_ranks_match_the_unsplit_model() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let mpirun = Command::new("mpirun").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !mpirun {
        use std::io::Write;
        let _ =
            writeln!(std::io::stderr(), "SKIPPED two_stages_on_two_ranks_match_the_unsplit_model: mpirun not found");
        return;
    }
    let out = std::env::temp_dir().join(format!("ds-rust-pipeline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let run = Command::new(root.join("tools/ds-run"))
        .args(["-n", "2"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "pipeline_rank", "--test-threads=1", "--nocapture"])
        .env("DS_RUST_PIPELINE_OUT", &out)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("run tools/ds-run");
    assert!(
        run.status.success(),
        "tools/ds-run failed: {}\n{}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let want = unsplit_losses();
    let ranks: Vec<Vec<String>> = (0..2).map(|r| read_rank(&out, r)).collect();
    let layers = N_LAYER + 3; // embedding, the transformer layers, ln_f, the head
    let ints = |line: &str| -> Vec<i32> { line.split(' ').take(7).map(|v| v.parse().unwrap()).collect() };
    let cut = ints(&ranks[0][0])[3];
    assert!(0 < cut && cut < layers, "{}", ranks[0][0]);
    for (r, lines) in ranks.iter().enumerate() {
        assert_eq!(lines.len(), 6, "rank {}: {:?}", r, lines);
        for (k, (got, want)) in lines[1..4].iter().zip(&want).enumerate() {
            let got: f64 = got.parse::<f32>().unwrap() as f64;
            let rtol = if k < 2 { 1e-5 } else { 1e-4 };
            assert!((got - want).abs() <= rtol * want.abs(), "rank {} loss {}: {} vs unsplit {}", r, k, got, want);
        }
        let (first, last) = if r == 0 { (0, cut) } else { (cut, layers) };
        let expect = vec![r as i32, 2, first, last, layers, GAS as i32, 1];
        assert_eq!(ints(&lines[0]), expect, "rank {} before", r);
        assert_eq!(ints(&lines[4]), expect, "rank {} after", r);
        let secs: Vec<f64> = lines[4].split(' ').skip(7).map(|v| v.parse().unwrap()).collect();
        assert!(secs[0] > 0.0 && secs[1] > 0.0 && secs[1] <= secs[0], "rank {}: {:?}", r, secs);
        assert_eq!(lines[5], STEPS.to_string(), "rank {} global_steps", r);
    }
    let _ = std::fs::remove_dir_all(&out);
}
