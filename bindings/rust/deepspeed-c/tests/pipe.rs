//! Pipeline parallelism and state offloading through the safe API: every
//! schedule stream DeepSpeed itself wrote (tests/data/pipe/schedules.txt)
//! from the `PipeSchedule` iterator, every topology fixture
//! (tests/data/pipe/topology.txt) plus rank/coord round trips against the
//! row-major formula, `Comm::split` / `Topology::comm`, and
//! offload/reload bit-identical around an evaluation.
use deepspeed_c::{
    offload_states, Backend, Comm, CommOptions, Engine, Model, OffloadDevice, PipeOp, PipeSchedule, ScheduleKind,
    Status, Tensor, TensorMut, Topology,
};

fn fixture(name: &str) -> String {
    let p = format!("{}/../../../tests/data/pipe/{}", env!("CARGO_MANIFEST_DIR"), name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {}", p, e))
}

fn line(i: &deepspeed_c::PipeInstr) -> String {
    format!("{} {} {} {}", i.step, i.op.name(), i.buffer_id, i.micro_batch)
}

#[test]
fn every_schedule_stream_matches_deepspeed() {
    let text = fixture("schedules.txt");
    let mut blocks = 0;
    let mut cur: Option<(PipeSchedule, Vec<String>, String)> = None;
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.first() {
            Some(&"S") => {
                let kind = match f[1] {
                    "train" => ScheduleKind::Train,
                    "inference" => ScheduleKind::Inference,
                    _ => ScheduleKind::DataParallel,
                };
                let n: Vec<i32> = f[2..].iter().map(|v| v.parse().unwrap()).collect();
                let (stages, micro, stage, buffers, steps) = (n[0], n[1], n[2], n[3], n[4]);
                let s = PipeSchedule::new(kind, micro, stages, stage).unwrap();
                assert_eq!(s.num_buffers().unwrap(), buffers, "{}", l);
                assert_eq!(s.num_steps().unwrap(), steps, "{}", l);
                cur = Some((s, Vec::new(), l.to_string()));
            }
            Some(&"I") => cur.as_mut().unwrap().1.push(l[2..].to_string()),
            Some(&"E") => {
                let (mut s, want, head) = cur.take().unwrap();
                let got: Vec<String> = s.by_ref().map(|i| line(&i)).collect();
                assert_eq!(got, want, "{}", head);
                assert!(s.next().is_none(), "{}: exhausted", head);
                s.reset().unwrap(); // the next batch runs the same stream
                assert_eq!(s.by_ref().map(|i| line(&i)).collect::<Vec<_>>(), want, "{} after reset", head);
                let by_step: Vec<String> =
                    (0..s.num_steps().unwrap()).flat_map(|st| s.step_instrs(st).unwrap()).map(|i| line(&i)).collect();
                assert_eq!(by_step, want, "{} by step", head);
                blocks += 1;
            }
            _ => {}
        }
    }
    assert!(blocks > 100, "only {} schedules in the fixture", blocks);
}

#[test]
fn partitions_match_deepspeed() {
    // tests/data/pipe/partitions.txt: DeepSpeed's own boundaries (P method stages layers, W, N, R, E)
    let text = fixture("partitions.txt");
    let (mut method, mut stages, mut layers) = (String::new(), 0i32, 0i32);
    let (mut counts, mut names, mut want): (Vec<i64>, Vec<String>, Vec<i32>) = (vec![], vec![], vec![]);
    let mut cases = 0;
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.first().copied() {
            Some("P") => {
                method = f[1].to_string();
                stages = f[2].parse().unwrap();
                layers = f[3].parse().unwrap();
                counts.clear();
                names.clear();
            }
            Some("W") => counts = f[1..].iter().map(|v| v.parse().unwrap()).collect(),
            Some("N") => names = f[1..].iter().map(|v| v.to_string()).collect(),
            Some("R") => want = f[1..].iter().map(|v| v.parse().unwrap()).collect(),
            Some("E") => {
                let n: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
                let got = deepspeed_c::partition_layers(&method, stages, layers, &counts, &n).unwrap();
                assert_eq!(got, want, "{} {} stages {} layers", method, stages, layers);
                cases += 1;
            }
            _ => {}
        }
    }
    assert!(cases >= 100, "{} cases", cases);
    let e = deepspeed_c::partition_layers("type:moe", 2, 2, &[], &["Embedding", "Linear"]).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.to_string().contains("matches no layer"), "{}", e);
    let e = deepspeed_c::partition_layers("profile", 2, 3, &[], &[]).unwrap_err();
    assert_eq!(e.status, Status::Unsupported);
}

#[test]
fn schedule_enum_and_errors() {
    let mut s = PipeSchedule::new(ScheduleKind::Train, 2, 2, 1).unwrap();
    // hand-checked: the last of 2 stages, 2 micro-batches (DeepSpeed's TrainSchedule)
    let ops: Vec<PipeOp> = s.by_ref().map(|i| i.op).collect();
    use PipeOp::*;
    assert_eq!(
        ops,
        vec![
            RecvActivation,
            LoadMicroBatch,
            ForwardPass,
            BackwardPass,
            SendGrad,
            RecvActivation,
            LoadMicroBatch,
            ForwardPass,
            BackwardPass,
            SendGrad,
            ReduceTiedGrads,
            ReduceGrads,
            OptimizerStep
        ]
    );
    let e = PipeSchedule::new(ScheduleKind::Train, 4, 2, 2).err().unwrap();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("stage_id"), "{}", e);
    let e = s.step_instrs(99).err().unwrap();
    assert!(e.message.contains("step"), "{}", e);
}

#[test]
fn topology_matches_deepspeed_fixtures() {
    let text = fixture("topology.txt");
    let mut t: Option<Topology> = None;
    let mut blocks = 0;
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.first() {
            Some(&"T") => {
                let n: usize = f[1].parse().unwrap();
                let axes: Vec<&str> = f[2..2 + n].to_vec();
                let dims: Vec<i32> = f[2 + n..2 + 2 * n].iter().map(|v| v.parse().unwrap()).collect();
                let topo = Topology::new(&axes, &dims).unwrap();
                assert_eq!(topo.world_size().unwrap(), f[2 + 2 * n].parse::<i32>().unwrap(), "{}", l);
                t = Some(topo);
                blocks += 1;
            }
            Some(&"C") => {
                let topo = t.as_ref().unwrap();
                let v: Vec<i32> = f[1..].iter().map(|v| v.parse().unwrap()).collect();
                assert_eq!(topo.coord_of(v[0]).unwrap(), v[1..].to_vec(), "{}", l);
                assert_eq!(topo.rank_of(&v[1..]).unwrap(), v[0], "{}", l);
            }
            Some(&"L") => {
                let want: Vec<Vec<i32>> = l[2 + f[1].len() + 1..]
                    .split('|')
                    .map(|g| g.split_whitespace().map(|v| v.parse().unwrap()).collect())
                    .collect();
                assert_eq!(t.as_ref().unwrap().axis_comm_lists(f[1]).unwrap(), want, "{}", l);
            }
            Some(&"R") => {
                let want = if f[2] == "-" { "" } else { f[2] };
                assert_eq!(t.as_ref().unwrap().rank_repr(f[1].parse().unwrap(), None).unwrap(), want, "{}", l);
            }
            Some(&"F") => {
                let colon = f.iter().position(|&x| x == ":").unwrap();
                let crit: Vec<(&str, i32)> = f[1..colon]
                    .iter()
                    .map(|c| {
                        let mut p = c.split('=');
                        (p.next().unwrap(), p.next().unwrap().parse().unwrap())
                    })
                    .collect();
                let want: Vec<i32> = f[colon + 1..].iter().map(|v| v.parse().unwrap()).collect();
                assert_eq!(t.as_ref().unwrap().filter_match(&crit).unwrap(), want, "{}", l);
            }
            _ => {}
        }
    }
    assert!(blocks >= 5);
}

#[test]
fn topology_round_trips_and_errors() {
    let t = Topology::pipe_model_data(2, 3, 2).unwrap(); // dims pipe 2, data 2, model 3
    assert_eq!(t.axes().unwrap(), vec![("pipe".to_string(), 2), ("data".to_string(), 2), ("model".to_string(), 3)]);
    for r in 0..12 {
        let c = t.coord_of(r).unwrap();
        assert_eq!(c, vec![r / 6, (r / 3) % 2, r % 3]);
        assert_eq!(t.rank_of(&c).unwrap(), r);
    }
    assert_eq!(t.dim("expert").unwrap(), 0);
    assert!(t.axis_comm_lists("expert").unwrap().is_empty());
    assert_eq!(t.rank_repr(11, Some(&["model"])).unwrap(), "pipe_01-data_01");
    let d = Topology::default_for(8).unwrap();
    assert_eq!((d.dim("pipe").unwrap(), d.dim("data").unwrap()), (4, 2));
    let e = Topology::new(&["pipe", "pipe"], &[2, 2]).err().unwrap();
    assert_eq!(e.status, Status::InvalidArgument);
    let e = t.rank_of(&[0, 2, 0]).err().unwrap();
    assert!(e.message.contains("data"), "{}", e);
    let e = t.filter_match(&[("nope", 0)]).err().unwrap();
    assert!(e.message.contains("nope"), "{}", e);
}

#[test]
fn split_topology_comm_and_p2p_errors_on_a_world_of_one() {
    let world = Comm::world_with(&CommOptions { backend: Backend::Local, ..Default::default() }).unwrap();
    let sub = world.split(0, 0).unwrap().expect("color 0 joins");
    assert_eq!((sub.rank().unwrap(), sub.size().unwrap()), (0, 1));
    assert!(world.split(-1, 0).unwrap().is_none());
    let t = Topology::pipe_data(1, 1).unwrap();
    assert_eq!(t.comm("pipe", &world).unwrap().size().unwrap(), 1);
    assert_eq!(t.group_comm(&["pipe", "data"], &world).unwrap().size().unwrap(), 1);
    let e = Topology::pipe_data(2, 1).unwrap().comm("pipe", &world).err().unwrap();
    assert_eq!(e.status, Status::InvalidArgument);
    let x = [1f32, 2.0, 3.0];
    let e = world.pipe_send(&Tensor::new(&x, &[3]).unwrap(), 0, 0).err().unwrap();
    assert!(e.message.contains("peer"), "{}", e);
    let mut y = [0f32; 3];
    let e = world.pipe_recv(&mut TensorMut::new(&mut y, &[3]).unwrap(), 1, 0).err().unwrap();
    assert!(e.message.contains("peer"), "{}", e);
}

const MLP: &str = r#"{"type": "sequential", "seed": 3, "loss": "mse", "layers": [
    {"type": "linear", "in_features": 3, "out_features": 8}, {"type": "gelu"},
    {"type": "linear", "in_features": 8, "out_features": 2}]}"#;
const ADAM: &str = r#"{"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}"#;

fn masters(e: &mut Engine) -> Vec<Vec<f32>> {
    let names: Vec<String> = e.named_parameters().unwrap().into_iter().map(|p| p.name).collect();
    names.iter().map(|n| e.get_full_fp32_param(n).unwrap()).collect()
}

#[test]
fn offload_reload_bit_identical_around_eval() {
    let dir = std::env::temp_dir().join(format!("ds_rust_offload_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut a = Engine::with_model(ADAM, &Model::new(MLP).unwrap()).unwrap();
    let mut b = Engine::with_model(ADAM, &Model::new(MLP).unwrap()).unwrap();
    let x: Vec<f32> = (0..12).map(|i| 0.1 * i as f32 - 0.5).collect();
    let t: Vec<f32> = (0..8).map(|i| 0.2 * (i % 3) as f32).collect();
    let (xt, tt) = (Tensor::new(&x, &[4, 3]).unwrap(), Tensor::new(&t, &[4, 2]).unwrap());
    let train = |e: &mut Engine| {
        let l = e.forward_loss(&xt, &tt).unwrap();
        e.backward().unwrap();
        e.step().unwrap();
        l
    };
    for _ in 0..3 {
        assert_eq!(train(&mut a).to_bits(), train(&mut b).to_bits());
    }
    let before = masters(&mut a);
    let which = offload_states::OPTIM_STATES | offload_states::HP_PARAMS | offload_states::LP_GRADS;
    a.offload_states(which, OffloadDevice::Nvme, Some(&dir)).unwrap();
    assert!(a.disk_report().unwrap().optimizer_state_bytes > 0);
    a.eval(true).unwrap();
    b.eval(true).unwrap();
    assert_eq!(a.forward_loss(&xt, &tt).unwrap().to_bits(), b.forward_loss(&xt, &tt).unwrap().to_bits());
    a.eval(false).unwrap();
    b.eval(false).unwrap();
    a.reload_states().unwrap();
    assert_eq!(masters(&mut a), before);
    a.offload_states(0, OffloadDevice::Nvme, Some(&dir)).unwrap();
    let e = a.forward_loss(&xt, &tt).err().unwrap();
    assert_eq!(e.status, Status::InvalidState);
    assert!(e.message.contains("reload_states"), "{}", e);
    a.reload_states().unwrap();
    for _ in 0..2 {
        assert_eq!(train(&mut a).to_bits(), train(&mut b).to_bits());
    }
    assert_eq!(masters(&mut a), masters(&mut b));
    a.offload_states(0, OffloadDevice::Cpu, None).unwrap();
    a.empty_partition_cache().unwrap();
    let e = a.offload_states(0x100, OffloadDevice::Cpu, None).err().unwrap();
    assert!(e.message.contains("which"), "{}", e);
    assert_eq!(train(&mut a).to_bits(), train(&mut b).to_bits());
    let _ = std::fs::remove_dir_all(&dir);
}
