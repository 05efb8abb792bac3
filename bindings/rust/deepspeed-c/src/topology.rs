//! Process topologies (`ds_topology_*`): DeepSpeed's `ProcessTopology`, named
//! axes ("pipe", "data", "model", ...) over the ranks of a world, the last
//! axis varying fastest.
use crate::comm::Comm;
use crate::error::{check, Error, Result, Status};
use crate::util::{cstring, owned};
use deepspeed_c_sys as sys;
use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr;

/// C strings of `names` (Err naming `what` on a NUL byte) and their pointers.
fn c_names(names: &[&str], what: &str) -> Result<(Vec<CString>, Vec<*const c_char>)> {
    let owned = names.iter().map(|n| cstring(n, what)).collect::<Result<Vec<_>>>()?;
    let ptrs = owned.iter().map(|c| c.as_ptr()).collect();
    Ok((owned, ptrs))
}

/// A topology. Plain data: `Send + Sync`, every query is thread-safe.
pub struct Topology {
    ptr: *mut sys::ds_topology_t,
}

unsafe impl Send for Topology {}
unsafe impl Sync for Topology {}

impl Drop for Topology {
    fn drop(&mut self) {
        unsafe { sys::ds_topology_destroy(self.ptr) };
    }
}

impl Topology {
    fn wrap(f: impl FnOnce(*mut *mut sys::ds_topology_t) -> i32) -> Result<Topology> {
        let mut ptr = ptr::null_mut();
        check(f(&mut ptr))?;
        Ok(Topology { ptr })
    }

    /// `ProcessTopology(axes, dims)`.
    pub fn new(axes: &[&str], dims: &[i32]) -> Result<Topology> {
        if axes.len() != dims.len() {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("Topology::new: {} axes but {} dims", axes.len(), dims.len()),
            ));
        }
        let (_keep, ptrs) = c_names(axes, "Topology::new: axis")?;
        Topology::wrap(|out| unsafe { sys::ds_topology_create(ptrs.as_ptr(), dims.as_ptr(), axes.len() as i32, out) })
    }

    /// `PipeDataParallelTopology(num_pp, num_dp)`: axes pipe, data.
    pub fn pipe_data(num_pp: i32, num_dp: i32) -> Result<Topology> {
        Topology::wrap(|out| unsafe { sys::ds_topology_create_pipe_data(num_pp, num_dp, out) })
    }

    /// `PipeModelDataParallelTopology(num_pp, num_mp, num_dp)`: axes pipe, data, model.
    pub fn pipe_model_data(num_pp: i32, num_mp: i32, num_dp: i32) -> Result<Topology> {
        Topology::wrap(|out| unsafe { sys::ds_topology_create_pipe_model_data(num_pp, num_mp, num_dp, out) })
    }

    /// PipelineParallelGrid's default for `world_size` ranks (prime factors dealt to pipe and data).
    pub fn default_for(world_size: i32) -> Result<Topology> {
        Topology::wrap(|out| unsafe { sys::ds_topology_create_default(world_size, out) })
    }

    pub fn world_size(&self) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::ds_topology_world_size(self.ptr, &mut v) })?;
        Ok(v)
    }

    pub fn num_axes(&self) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::ds_topology_num_axes(self.ptr, &mut v) })?;
        Ok(v)
    }

    /// Axis `index`: its name and size.
    pub fn axis(&self, index: i32) -> Result<(String, i32)> {
        let (mut name, mut dim) = (ptr::null(), 0);
        check(unsafe { sys::ds_topology_axis(self.ptr, index, &mut name, &mut dim) })?;
        Ok((owned(name), dim))
    }

    /// Every axis in order, with its size.
    pub fn axes(&self) -> Result<Vec<(String, i32)>> {
        (0..self.num_axes()?).map(|i| self.axis(i)).collect()
    }

    /// `get_dim`: the size of `axis`, 0 when there is no such axis.
    pub fn dim(&self, axis: &str) -> Result<i32> {
        let a = cstring(axis, "Topology::dim: axis")?;
        let mut v = 0;
        check(unsafe { sys::ds_topology_dim(self.ptr, a.as_ptr(), &mut v) })?;
        Ok(v)
    }

    /// `get_rank`: the rank at `coords` (axis order).
    pub fn rank_of(&self, coords: &[i32]) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::ds_topology_rank_of(self.ptr, coords.as_ptr(), coords.len() as i32, &mut v) })?;
        Ok(v)
    }

    /// `get_coord`: the coordinates of `rank` in axis order.
    pub fn coord_of(&self, rank: i32) -> Result<Vec<i32>> {
        let mut c = vec![0i32; self.num_axes()? as usize];
        check(unsafe { sys::ds_topology_coord_of(self.ptr, rank, c.as_mut_ptr(), c.len() as i32) })?;
        Ok(c)
    }

    /// `get_axis_comm_lists(axis)`: one rank list per combination of the
    /// other axes (empty for an axis the topology lacks).
    pub fn axis_comm_lists(&self, axis: &str) -> Result<Vec<Vec<i32>>> {
        let a = cstring(axis, "Topology::axis_comm_lists: axis")?;
        let mut flat = vec![0i32; self.world_size()? as usize]; // the lists hold every rank once
        let (mut lists, mut len) = (0, 0);
        check(unsafe {
            sys::ds_topology_axis_comm_lists(
                self.ptr,
                a.as_ptr(),
                flat.as_mut_ptr(),
                flat.len() as i64,
                &mut lists,
                &mut len,
            )
        })?;
        Ok((0..lists as usize).map(|i| flat[i * len as usize..(i + 1) * len as usize].to_vec()).collect())
    }

    /// `filter_match(axis=coord, ...)`: the matching ranks, increasing (no criteria: every rank).
    pub fn filter_match(&self, criteria: &[(&str, i32)]) -> Result<Vec<i32>> {
        let names: Vec<&str> = criteria.iter().map(|c| c.0).collect();
        let coords: Vec<i32> = criteria.iter().map(|c| c.1).collect();
        let (_keep, ptrs) = c_names(&names, "Topology::filter_match: axis")?;
        let mut out = vec![0i32; self.world_size()? as usize];
        let mut count = 0;
        check(unsafe {
            sys::ds_topology_filter_match(
                self.ptr,
                ptrs.as_ptr(),
                coords.as_ptr(),
                ptrs.len() as i32,
                out.as_mut_ptr(),
                out.len() as i64,
                &mut count,
            )
        })?;
        out.truncate(count as usize);
        Ok(out)
    }

    /// `get_rank_repr(rank, omit_axes)`; `None`: DeepSpeed's default, omit "data" and "pipe".
    pub fn rank_repr(&self, rank: i32, omit_axes: Option<&[&str]>) -> Result<String> {
        let (_keep, ptrs) = c_names(omit_axes.unwrap_or(&[]), "Topology::rank_repr: omit axis")?;
        let omit = if omit_axes.is_some() { ptrs.as_ptr() } else { ptr::null() };
        let mut needed = 0usize;
        let mut probe = [0 as c_char; 1];
        let s = unsafe {
            sys::ds_topology_rank_repr(self.ptr, rank, omit, ptrs.len() as i32, probe.as_mut_ptr(), 1, &mut needed)
        };
        if s == sys::DS_OK {
            return Ok(String::new());
        }
        if needed == 0 {
            check(s)?; // not a size problem
        }
        let mut buf = vec![0 as c_char; needed];
        check(unsafe {
            sys::ds_topology_rank_repr(self.ptr, rank, omit, ptrs.len() as i32, buf.as_mut_ptr(), needed, &mut needed)
        })?;
        Ok(owned(buf.as_ptr()))
    }

    /// This rank's communicator along `axis`: collective over `world`, whose
    /// size must be the topology's; the new rank is this rank's coordinate.
    pub fn comm(&self, axis: &str, world: &Comm) -> Result<Comm> {
        let a = cstring(axis, "Topology::comm: axis")?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::ds_topology_comm(self.ptr, world.raw(), a.as_ptr(), &mut out) })?;
        Ok(Comm::from_raw(out))
    }

    /// The ranks sharing this rank's coordinates on every axis not in `axes`
    /// (`["pipe", "model"]`: DeepSpeed's model-parallel group). Collective over `world`.
    pub fn group_comm(&self, axes: &[&str], world: &Comm) -> Result<Comm> {
        let (_keep, ptrs) = c_names(axes, "Topology::group_comm: axis")?;
        let mut out = ptr::null_mut();
        check(unsafe {
            sys::ds_topology_group_comm(self.ptr, world.raw(), ptrs.as_ptr(), ptrs.len() as i32, &mut out)
        })?;
        Ok(Comm::from_raw(out))
    }
}
