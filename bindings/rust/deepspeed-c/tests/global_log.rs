//! The library-wide log sink (its own test binary: it changes process state).
use deepspeed_c::{set_log_callback, Engine, LogLevel, Tensor};
use std::sync::{Arc, Mutex};

#[test]
fn library_wide_sink_takes_engine_messages_without_their_own_closure() {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    set_log_callback(Some(move |_level: LogLevel, msg: &str| sink.lock().unwrap().push(msg.to_string())));
    let mut e = Engine::builder()
        .log_level(LogLevel::Info)
        .build(r#"{"train_batch_size": 1, "steps_per_print": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}"#)
        .unwrap();
    e.add_param("w", &Tensor::vector(&[1.0f32]), true).unwrap();
    e.init().unwrap();
    e.accumulate_grad("w", &Tensor::vector(&[1.0f32])).unwrap();
    e.backward().unwrap();
    e.step().unwrap();
    let n = seen.lock().unwrap().len();
    assert!(n > 0, "the library-wide sink got nothing");
    // Back to the default: no more messages reach the closure.
    set_log_callback(None::<fn(LogLevel, &str)>);
    e.accumulate_grad("w", &Tensor::vector(&[1.0f32])).unwrap();
    e.backward().unwrap();
    e.step().unwrap();
    assert_eq!(seen.lock().unwrap().len(), n);
}
