//! Pipeline schedules (`ds_pipe_schedule_*`): DeepSpeed's TrainSchedule
//! (1F1B), InferenceSchedule and DataParallelSchedule as an iterator of
//! instructions for a host that runs its own stages.
use crate::error::{check, Error, Result, Status};
use crate::util::{cstring, owned};
use deepspeed_c_sys as sys;
use std::ptr;

/// Which schedule (`DS_PIPE_SCHEDULE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleKind {
    Train,
    Inference,
    DataParallel,
}

/// An instruction kind (`DS_PIPE_INSTR_*`, DeepSpeed's instruction classes).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PipeOp {
    LoadMicroBatch,
    ForwardPass,
    BackwardPass,
    SendActivation,
    RecvActivation,
    SendGrad,
    RecvGrad,
    ReduceTiedGrads,
    ReduceGrads,
    OptimizerStep,
    /// A code this crate does not know (a newer library).
    Unknown(i32),
}

impl PipeOp {
    fn from_code(c: i32) -> PipeOp {
        match c {
            sys::DS_PIPE_INSTR_LOAD_MICRO_BATCH => PipeOp::LoadMicroBatch,
            sys::DS_PIPE_INSTR_FORWARD_PASS => PipeOp::ForwardPass,
            sys::DS_PIPE_INSTR_BACKWARD_PASS => PipeOp::BackwardPass,
            sys::DS_PIPE_INSTR_SEND_ACTIVATION => PipeOp::SendActivation,
            sys::DS_PIPE_INSTR_RECV_ACTIVATION => PipeOp::RecvActivation,
            sys::DS_PIPE_INSTR_SEND_GRAD => PipeOp::SendGrad,
            sys::DS_PIPE_INSTR_RECV_GRAD => PipeOp::RecvGrad,
            sys::DS_PIPE_INSTR_REDUCE_TIED_GRADS => PipeOp::ReduceTiedGrads,
            sys::DS_PIPE_INSTR_REDUCE_GRADS => PipeOp::ReduceGrads,
            sys::DS_PIPE_INSTR_OPTIMIZER_STEP => PipeOp::OptimizerStep,
            other => PipeOp::Unknown(other),
        }
    }

    /// The C code.
    pub fn code(self) -> i32 {
        match self {
            PipeOp::LoadMicroBatch => sys::DS_PIPE_INSTR_LOAD_MICRO_BATCH,
            PipeOp::ForwardPass => sys::DS_PIPE_INSTR_FORWARD_PASS,
            PipeOp::BackwardPass => sys::DS_PIPE_INSTR_BACKWARD_PASS,
            PipeOp::SendActivation => sys::DS_PIPE_INSTR_SEND_ACTIVATION,
            PipeOp::RecvActivation => sys::DS_PIPE_INSTR_RECV_ACTIVATION,
            PipeOp::SendGrad => sys::DS_PIPE_INSTR_SEND_GRAD,
            PipeOp::RecvGrad => sys::DS_PIPE_INSTR_RECV_GRAD,
            PipeOp::ReduceTiedGrads => sys::DS_PIPE_INSTR_REDUCE_TIED_GRADS,
            PipeOp::ReduceGrads => sys::DS_PIPE_INSTR_REDUCE_GRADS,
            PipeOp::OptimizerStep => sys::DS_PIPE_INSTR_OPTIMIZER_STEP,
            PipeOp::Unknown(c) => c,
        }
    }

    /// DeepSpeed's class name ("ForwardPass"; "?" for an unknown code).
    pub fn name(self) -> String {
        owned(unsafe { sys::ds_pipe_instr_name(self.code()) })
    }
}

/// One instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipeInstr {
    pub op: PipeOp,
    /// The pipeline buffer; -1 for the reductions and the optimizer step.
    pub buffer_id: i32,
    /// The step it belongs to.
    pub step: i32,
    /// The micro-batch it loads, computes or moves; -1 for the reductions and the optimizer step.
    pub micro_batch: i32,
}

fn blank() -> sys::ds_pipe_instr_t {
    let mut c: sys::ds_pipe_instr_t = unsafe { std::mem::zeroed() };
    c.struct_size = std::mem::size_of::<sys::ds_pipe_instr_t>();
    c
}

fn from_c(c: &sys::ds_pipe_instr_t) -> PipeInstr {
    PipeInstr { op: PipeOp::from_code(c.type_), buffer_id: c.buffer_id, step: c.step, micro_batch: c.micro_batch }
}

/// A schedule for one batch: an `Iterator` over its instructions from the
/// first (call [`PipeSchedule::reset`] to run the next batch). A call error
/// (impossible on a live schedule) ends the iteration; [`PipeSchedule::next_instr`]
/// reports it.
pub struct PipeSchedule {
    ptr: *mut sys::ds_pipe_schedule_t,
}

unsafe impl Send for PipeSchedule {}

impl Drop for PipeSchedule {
    fn drop(&mut self) {
        unsafe { sys::ds_pipe_schedule_destroy(self.ptr) };
    }
}

impl PipeSchedule {
    /// The schedule of `stage_id` of `stages` for `micro_batches` micro-batches.
    pub fn new(kind: ScheduleKind, micro_batches: i32, stages: i32, stage_id: i32) -> Result<PipeSchedule> {
        let k = match kind {
            ScheduleKind::Train => sys::DS_PIPE_SCHEDULE_TRAIN,
            ScheduleKind::Inference => sys::DS_PIPE_SCHEDULE_INFERENCE,
            ScheduleKind::DataParallel => sys::DS_PIPE_SCHEDULE_DATA_PARALLEL,
        };
        let mut ptr = ptr::null_mut();
        check(unsafe { sys::ds_pipe_schedule_create(k, micro_batches, stages, stage_id, &mut ptr) })?;
        Ok(PipeSchedule { ptr })
    }

    /// The next instruction, `Ok(None)` once every one was returned.
    pub fn next_instr(&mut self) -> Result<Option<PipeInstr>> {
        let mut c = blank();
        let mut done = 0;
        check(unsafe { sys::ds_pipe_schedule_next(self.ptr, &mut c, &mut done) })?;
        Ok(if done != 0 { None } else { Some(from_c(&c)) })
    }

    /// Back to the first instruction.
    pub fn reset(&mut self) -> Result<()> {
        check(unsafe { sys::ds_pipe_schedule_reset(self.ptr) })
    }

    /// `num_pipe_buffers()`.
    pub fn num_buffers(&self) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::ds_pipe_schedule_num_buffers(self.ptr, &mut v) })?;
        Ok(v)
    }

    /// Steps, counting the bubbles.
    pub fn num_steps(&self) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::ds_pipe_schedule_num_steps(self.ptr, &mut v) })?;
        Ok(v)
    }

    /// The instructions of `step` (DeepSpeed's yielded list; empty for a bubble).
    pub fn step_instrs(&self, step: i32) -> Result<Vec<PipeInstr>> {
        let mut n = 0;
        check(unsafe { sys::ds_pipe_schedule_step_size(self.ptr, step, &mut n) })?;
        (0..n)
            .map(|i| {
                let mut c = blank();
                check(unsafe { sys::ds_pipe_schedule_instr(self.ptr, step, i, &mut c) })?;
                Ok(from_c(&c))
            })
            .collect()
    }
}

impl Iterator for PipeSchedule {
    type Item = PipeInstr;
    fn next(&mut self) -> Option<PipeInstr> {
        self.next_instr().ok().flatten()
    }
}

/// Stage boundaries as DeepSpeed's PipelineModule computes them for `method`
/// (`"uniform"`, `"parameters"` over `param_counts`, `"type:<regex>"` over
/// `type_names`; `ds_pipe_partition`): stage s holds layers
/// `parts[s]..parts[s + 1]`. The list a method does not read may be empty.
pub fn partition_layers(
    method: &str,
    num_stages: i32,
    num_layers: i32,
    param_counts: &[i64],
    type_names: &[&str],
) -> Result<Vec<i32>> {
    for (len, what) in [(param_counts.len(), "param_counts"), (type_names.len(), "type_names")] {
        if len != 0 && len != num_layers.max(0) as usize {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("partition_layers: {} {} for {} layers", len, what, num_layers),
            ));
        }
    }
    let m = cstring(method, "method")?;
    let names = type_names.iter().map(|n| cstring(n, "type name")).collect::<Result<Vec<_>>>()?;
    let name_ptrs: Vec<*const std::os::raw::c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let mut parts = vec![0i32; num_stages.max(0) as usize + 1];
    check(unsafe {
        sys::ds_pipe_partition(
            m.as_ptr(),
            num_layers,
            if param_counts.is_empty() { ptr::null() } else { param_counts.as_ptr() },
            if name_ptrs.is_empty() { ptr::null() } else { name_ptrs.as_ptr() },
            num_stages,
            parts.as_mut_ptr(),
        )
    })?;
    Ok(parts)
}
