//! Communicators (`ds_comm_*`): the group of ranks an engine trains with.
use crate::error::{check, Result};
use crate::tensor::{Tensor, TensorMut};
use crate::util::cstring;
use deepspeed_c_sys as sys;
use std::ptr;

/// The reduction of a collective (`DS_REDUCE_*`, deepspeed.comm's `ReduceOp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    /// The sum divided by the rank count (floating dtypes only).
    Avg,
    Max,
}

impl ReduceOp {
    fn code(self) -> i32 {
        match self {
            ReduceOp::Sum => sys::DS_REDUCE_SUM,
            ReduceOp::Avg => sys::DS_REDUCE_AVG,
            ReduceOp::Max => sys::DS_REDUCE_MAX,
        }
    }
}

/// Communicator backend (`DS_COMM_BACKEND_*`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// mpi when started by mpirun/srun/tools/ds-run, else local.
    Auto,
    Local,
    Mpi,
    Nccl,
}

impl Backend {
    fn code(self) -> i32 {
        match self {
            Backend::Auto => sys::DS_COMM_BACKEND_AUTO,
            Backend::Local => sys::DS_COMM_BACKEND_LOCAL,
            Backend::Mpi => sys::DS_COMM_BACKEND_MPI,
            Backend::Nccl => sys::DS_COMM_BACKEND_NCCL,
        }
    }
}

/// Options for [`Comm::world_with`]; `None` fields take the library's defaults.
#[derive(Debug, Clone, Copy)]
pub struct CommOptions {
    pub timeout_ms: Option<i32>,
    pub debug: Option<bool>,
    pub backend: Backend,
}

impl Default for CommOptions {
    fn default() -> Self {
        CommOptions { timeout_ms: None, debug: None, backend: Backend::Auto }
    }
}

/// A communicator handle. Every ds_comm_* function may run on any thread, so
/// `Comm` is `Send + Sync`. An engine built with it keeps its own reference:
/// dropping the `Comm` first is fine.
pub struct Comm {
    ptr: *mut sys::ds_comm_t,
}

unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

impl Comm {
    /// The world this process was started in (MPI_COMM_WORLD under a
    /// launcher, else one rank). Collective under a launcher.
    pub fn world() -> Result<Comm> {
        Comm::world_with(&CommOptions::default())
    }

    /// [`Comm::world`] with options.
    pub fn world_with(opts: &CommOptions) -> Result<Comm> {
        let mut o: sys::ds_comm_options_t = unsafe { std::mem::zeroed() };
        unsafe { sys::ds_comm_options_init(&mut o, std::mem::size_of::<sys::ds_comm_options_t>()) };
        if let Some(t) = opts.timeout_ms {
            o.timeout_ms = t;
        }
        if let Some(d) = opts.debug {
            o.debug = d as i32;
        }
        o.backend = opts.backend.code();
        let mut ptr = ptr::null_mut();
        check(unsafe { sys::ds_comm_create_world(&o, &mut ptr) })?;
        Ok(Comm { ptr })
    }

    pub(crate) fn raw(&self) -> *mut sys::ds_comm_t {
        self.ptr
    }

    pub(crate) fn from_raw(ptr: *mut sys::ds_comm_t) -> Comm {
        Comm { ptr }
    }

    /// `MPI_Comm_split`, collective over this communicator: ranks passing the
    /// same `color >= 0` form a new communicator ranked by `key` (ties: their
    /// rank here). A negative color joins none: `Ok(None)`.
    pub fn split(&self, color: i32, key: i32) -> Result<Option<Comm>> {
        let mut out = ptr::null_mut();
        check(unsafe { sys::ds_comm_split(self.ptr, color, key, &mut out) })?;
        Ok(if out.is_null() { None } else { Some(Comm { ptr: out }) })
    }

    /// `ds_pipe_send`: `tensor` (dtype, shape, bytes) to rank `peer`, `tag`
    /// in [0, 32767]; blocks until handed over, timed by the communicator.
    pub fn pipe_send(&self, tensor: &Tensor<'_>, peer: i32, tag: i32) -> Result<()> {
        let t = tensor.raw();
        check(unsafe { sys::ds_pipe_send(self.ptr, &t, peer, tag) })
    }

    /// `ds_pipe_recv` into `tensor`, which must have the sent dtype and shape
    /// (a mismatch is `InvalidArgument` naming both; the message is consumed).
    pub fn pipe_recv(&self, tensor: &mut TensorMut<'_>, peer: i32, tag: i32) -> Result<()> {
        let mut t = tensor.raw();
        check(unsafe { sys::ds_pipe_recv(self.ptr, &mut t, peer, tag) })
    }

    /// `ds_comm_all_reduce` (deepspeed.comm's `all_reduce`): in place, `tensor`
    /// becomes the reduction over the ranks. Collective.
    pub fn all_reduce(&self, tensor: &mut TensorMut<'_>, op: ReduceOp) -> Result<()> {
        let mut t = tensor.raw();
        check(unsafe { sys::ds_comm_all_reduce(self.ptr, &mut t, op.code()) })
    }

    /// `ds_comm_all_gather_into_tensor`: `output` (size x input's elements)
    /// gets every rank's `input` in rank order. Collective.
    pub fn all_gather_into_tensor(&self, output: &mut TensorMut<'_>, input: &Tensor<'_>) -> Result<()> {
        let (mut o, i) = (output.raw(), input.raw());
        check(unsafe { sys::ds_comm_all_gather_into_tensor(self.ptr, &mut o, &i) })
    }

    /// `ds_comm_reduce_scatter_tensor`: `input` holds size x output's
    /// elements; block `rank` of the reduction lands in `output`. Collective.
    pub fn reduce_scatter_tensor(&self, output: &mut TensorMut<'_>, input: &Tensor<'_>, op: ReduceOp) -> Result<()> {
        let (mut o, i) = (output.raw(), input.raw());
        check(unsafe { sys::ds_comm_reduce_scatter_tensor(self.ptr, &mut o, &i, op.code()) })
    }

    /// `ds_comm_all_to_all_single` with equal splits: block j of `input` goes
    /// to rank j, block i of `output` comes from rank i. Collective.
    pub fn all_to_all_single(&self, output: &mut TensorMut<'_>, input: &Tensor<'_>) -> Result<()> {
        let (mut o, i) = (output.raw(), input.raw());
        check(unsafe { sys::ds_comm_all_to_all_single(self.ptr, &mut o, &i) })
    }

    /// `ds_comm_broadcast`: `tensor` becomes rank `src`'s on every rank. Collective.
    pub fn broadcast(&self, tensor: &mut TensorMut<'_>, src: i32) -> Result<()> {
        let mut t = tensor.raw();
        check(unsafe { sys::ds_comm_broadcast(self.ptr, &mut t, src) })
    }

    /// `ds_comm_barrier`: returns when every rank has entered it.
    pub fn barrier(&self) -> Result<()> {
        check(unsafe { sys::ds_comm_barrier(self.ptr) })
    }

    pub fn rank(&self) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::ds_comm_rank(self.ptr, &mut v) })?;
        Ok(v)
    }

    pub fn size(&self) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::ds_comm_size(self.ptr, &mut v) })?;
        Ok(v)
    }

    /// The backend in use (never Auto).
    pub fn backend(&self) -> Result<Backend> {
        let mut v = 0;
        check(unsafe { sys::ds_comm_backend(self.ptr, &mut v) })?;
        Ok(match v {
            sys::DS_COMM_BACKEND_MPI => Backend::Mpi,
            sys::DS_COMM_BACKEND_NCCL => Backend::Nccl,
            _ => Backend::Local,
        })
    }

    /// Collective teardown (a barrier, then MPI_Finalize when the library
    /// initialised MPI and this was its last communicator).
    pub fn finalize(&self) -> Result<()> {
        check(unsafe { sys::ds_comm_finalize(self.ptr) })
    }

    /// Break the communicator: collectives in flight and later ones fail
    /// with `Status::Comm` naming `reason`. Any thread may call it.
    pub fn abort(&self, reason: &str) -> Result<()> {
        let r = cstring(reason, "reason")?;
        check(unsafe { sys::ds_comm_abort(self.ptr, r.as_ptr()) })
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        unsafe { sys::ds_comm_destroy(self.ptr) };
    }
}
