//! Engine::train_batch / eval_batch / pipe_info on a world of one: an engine
//! that is not a pipeline stage refuses them (InvalidState naming the
//! pipeline) and stays usable; a GPT spec asking for two stages is refused by
//! engine creation naming pipeline.stages, a bad pipeline object by the model,
//! naming its key. (The training itself needs several ranks:
//! tests/mpi/test_pipe_engine.cpp.)
use deepspeed_c::{Engine, Model, Status, Tensor};

const CONFIG: &str = r#"{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}"#;

fn gpt_spec(extra: &str) -> String {
    format!(
        r#"{{"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16, "seed": 3{}}}"#,
        extra
    )
}

#[test]
fn a_plain_engine_refuses_the_batch_calls_and_stays_usable() {
    let model = Model::new(&gpt_spec("")).unwrap();
    let mut e = Engine::with_model(CONFIG, &model).unwrap();
    let ids: Vec<i32> = (0..32).map(|i| (i * 7 + 3) % 16).collect();
    let targets: Vec<i32> = (0..32).map(|i| (i * 5 + 1) % 16).collect();
    let x = Tensor::new(&ids, &[4, 8]).unwrap();
    let y = Tensor::new(&targets, &[4, 8]).unwrap();

    let err = e.train_batch(Some(&x), Some(&y)).unwrap_err();
    assert_eq!(err.status, Status::InvalidState, "{}", err);
    assert!(err.message.contains("not a pipeline stage"), "{}", err.message);
    let err = e.train_batch(None, None).unwrap_err();
    assert_eq!(err.status, Status::InvalidState, "{}", err);
    let err = e.eval_batch(Some(&x), Some(&y)).unwrap_err();
    assert_eq!(err.status, Status::InvalidState, "{}", err);
    assert!(err.message.contains("ds_eval_batch") && err.message.contains("pipeline"), "{}", err.message);
    let err = e.pipe_info().unwrap_err();
    assert_eq!(err.status, Status::InvalidState, "{}", err);
    assert!(err.message.contains("pipeline"), "{}", err.message);

    // One micro-step through forward: the refusals changed nothing.
    let (mx, my) = (Tensor::new(&ids[..16], &[2, 8]).unwrap(), Tensor::new(&targets[..16], &[2, 8]).unwrap());
    let loss = e.forward_loss(&mx, &my).unwrap();
    assert!(loss.is_finite() && loss > 0.0, "{}", loss);
    e.backward().unwrap();
    assert!(!e.step().unwrap().stepped); // micro-step 1 of 2
    assert_eq!(e.micro_steps().unwrap(), 1);
}

#[test]
fn two_stages_on_a_world_of_one_are_refused() {
    let model = Model::new(&gpt_spec(r#", "pipeline": {"stages": 2, "partition_method": "parameters"}"#)).unwrap();
    let err = Engine::with_model(CONFIG, &model).err().expect("two stages need two ranks");
    assert_eq!(err.status, Status::InvalidArgument, "{}", err);
    assert!(err.message.contains("pipeline.stages"), "{}", err.message);
}

#[test]
fn a_bad_pipeline_object_is_refused_naming_the_key() {
    for (pipeline, key) in [(r#"{"stagez": 2}"#, "pipeline.stagez"), (r#"{"stages": 0}"#, "pipeline.stages")] {
        let err =
            Model::new(&gpt_spec(&format!(r#", "pipeline": {}"#, pipeline))).err().expect("a bad pipeline object");
        assert_eq!(err.status, Status::InvalidConfig, "{}", err);
        assert!(err.message.contains(key), "{}", err.message);
    }
}
