#include "engine/device_front.h"

#include <algorithm>
#include <iterator>

#include "core/device_memory.h"
#include "core/error.h"

namespace ds {

DeviceFront::DeviceFront(Device device, bool pin_grads, bool pin_weights, Allocator& alloc)
    : device_(device),
      alloc_(alloc),
      pin_(pin_grads),
      grads_(device, pin_grads, alloc),
      gathered_up_(device, pin_weights, alloc) {}

namespace {

// Whether `p`'s host working weights are the view of `flat` at p.flat_offset.
bool in_flat(const Param& p, const Tensor& flat) {
    if (!flat.defined() || !p.trainable || p.numel == 0 || p.flat_offset < 0) return false;
    if (p.working.dtype() != flat.dtype() || !p.working.is_contiguous()) return false;
    const auto* at = static_cast<const char*>(flat.data_ptr()) + p.flat_offset * static_cast<int64_t>(flat.element_size());
    return p.working.data_ptr() == at && p.flat_offset + p.numel <= flat.numel();
}

}  // namespace

void DeviceFront::materialize(ParamStore& params, const Tensor& host_flat) {
    int64_t largest = 0;  // the staging for the largest gradient (fp32 at most), once
    for (const Param& p : params.all())
        if (p.trainable) largest = std::max(largest, p.numel);
    if (largest > 0) reserve_staging(static_cast<size_t>(largest) * sizeof(float));
    if (host_flat.defined()) {
        DS_CHECK(host_flat.device().is_cpu() && host_flat.is_contiguous(), DS_ERR_INTERNAL,
                 "the flat working buffer of a ZeRO-Offload engine is not contiguous host memory");
        host_flat_ = host_flat;
        device_flat_ = Tensor::empty(host_flat.shape(), host_flat.dtype(), device_, alloc_, MemCategory::Params);
    }
    for (Param& p : params.all()) {
        if (!p.working.defined()) continue;
        if (in_flat(p, host_flat_)) {
            weights_.emplace(&p, device_flat_.view(p.shape, p.flat_offset));
        } else {
            weights_.emplace(&p, Tensor::empty(p.shape, p.working.dtype(), device_, alloc_, MemCategory::Params));
            own_.push_back(&p);
        }
    }
    refresh_all(host_flat);
}

DeviceFront::~DeviceFront() {
    try {
        settle_all();
    } catch (...) {  // the device failed: the pipe's destructor still waits for its copies
    }
    wait_uploads();
    if (upload_stream_ == nullptr && upload_event_ == nullptr) return;
    try {
        const device_memory::DeviceScope scope(device_.index);  // the stream's and event's device
        device_memory::event_destroy(upload_event_);
        device_memory::stream_destroy(upload_stream_);
    } catch (...) {  // the device cannot be selected any more: nothing left to free on it
    }
}

void DeviceFront::upload_range(int64_t begin, int64_t count) noexcept {
    if (upload_failed_ || count <= 0 || !mirrors_flat()) return;
    try {
        const device_memory::DeviceScope scope(device_.index);
        if (upload_stream_ == nullptr)
            upload_stream_ = device_memory::stream_create("creating the stream for weight copies to the device");
        if (upload_event_ == nullptr) upload_event_ = device_memory::event_create("an event for weight copies");
        if (uploaded_.empty())  // the device twin is read by kernels queued on the legacy stream so far
            device_memory::order_after(upload_stream_, nullptr, "ordering weight copies after the device's work");
        queue_upload(begin, begin + count, "copying updated weights to the device during the step");
        uploaded_.emplace_back(begin, count);
    } catch (...) {
        upload_failed_ = true;  // refresh_trained copies everything
    }
}

// Elements [begin, end) of the flat buffer to its device twin, on the upload stream.
void DeviceFront::queue_upload(int64_t begin, int64_t end, const char* what) {
    if (end <= begin) return;
    const int64_t es = static_cast<int64_t>(host_flat_.element_size());
    device_memory::copy_async(static_cast<char*>(device_flat_.data_ptr()) + begin * es,
                              static_cast<const char*>(host_flat_.data_ptr()) + begin * es,
                              static_cast<size_t>((end - begin) * es), upload_stream_, what);
}

// The ranges upload_range did not queue (the other ranks' partitions, which
// arrive by the all-gather after the step) queued too, then the host waits:
// the host buffer may be written again once this returns.
void DeviceFront::finish_uploads() {
    std::vector<std::pair<int64_t, int64_t>> done = std::move(uploaded_);
    uploaded_.clear();
    std::sort(done.begin(), done.end());
    const device_memory::DeviceScope scope(device_.index);
    const char* what = "copying the other ranks' updated weights to the device";
    int64_t at = 0;
    for (const auto& [b, c] : done) {
        queue_upload(at, b, what);
        at = std::max(at, b + c);
    }
    queue_upload(at, host_flat_.numel(), what);
    device_memory::event_record(upload_event_, upload_stream_, "recording the weight copies");
    device_memory::event_synchronize(upload_event_, "waiting for the weight copies to the device");
}

void DeviceFront::wait_uploads() noexcept {
    if (uploaded_.empty() && !upload_failed_) return;
    uploaded_.clear();
    upload_failed_ = false;
    if (upload_stream_ == nullptr) return;
    try {
        const device_memory::DeviceScope scope(device_.index);
        device_memory::event_record(upload_event_, upload_stream_, "recording the weight copies");
        device_memory::event_synchronize(upload_event_, "waiting for the weight copies to the device");
    } catch (...) {  // the device failed: its copies will not land later either
    }
}

void DeviceFront::retract_uploads() {
    const std::vector<std::pair<int64_t, int64_t>> done = uploaded_;  // wait_uploads forgets them
    const bool failed = upload_failed_;
    wait_uploads();
    if (failed) {
        copy_flat(host_flat_);
        return;
    }
    if (done.empty()) return;
    const device_memory::DeviceScope scope(device_.index);
    for (const auto& [b, c] : done)
        queue_upload(b, b + c, "copying the restored weights to the device after a failed step");
    device_memory::event_record(upload_event_, upload_stream_, "recording the weight copies");
    device_memory::event_synchronize(upload_event_, "waiting for the restored weights' copies to the device");
}

void DeviceFront::refresh_trained(const Tensor& host_flat) {
    if (!uploaded_.empty() && !upload_failed_) {
        DS_CHECK(host_flat.data_ptr() == host_flat_.data_ptr(), DS_ERR_INTERNAL,
                 "the strategy's flat working buffer moved after the engine's device weights were laid out");
        finish_uploads();
    } else {
        copy_flat(host_flat);  // after wait_uploads: a failed upload_range copies everything here
    }
    for (const Param* p : own_)
        if (p->trainable) copy_one(*p);  // ZeRO 1/2: empty ones only; ZeRO-3: the persistent ones
    refresh_gathered();
}

void DeviceFront::refresh_all(const Tensor& host_flat) {
    copy_flat(host_flat);
    for (const Param* p : own_) copy_one(*p);
    refresh_gathered();
}

void DeviceFront::refresh(const Param& p) {
    drop_released();  // the write may have freed ZeRO-3 copies kept for reuse
    if (weights_.count(&p) || gathered_.count(&p)) copy_one(p);  // not gathered: copied on first use
}

// ZeRO-3: the copies of parameters still gathered get their new values; the
// others go.
void DeviceFront::refresh_gathered() {
    drop_released();
    for (const auto& [p, d] : gathered_) copy_one(*p);
}

void DeviceFront::drop_released() {
    settle_all();  // a copy queued ahead must land before its block is freed
    for (auto it = gathered_.begin(); it != gathered_.end();)
        it = it->first->working.defined() ? std::next(it) : gathered_.erase(it);
}

void DeviceFront::copy_flat(const Tensor& host_flat) {
    wait_uploads();
    DS_CHECK(host_flat.data_ptr() == host_flat_.data_ptr(), DS_ERR_INTERNAL,
             "the strategy's flat working buffer moved after the engine's device weights were laid out");
    if (!device_flat_.defined() || device_flat_.nbytes() == 0) return;
    const device_memory::DeviceScope scope(device_.index);
    device_memory::copy_on_stream(device_flat_.data_ptr(), host_flat_.data_ptr(), host_flat_.nbytes(), nullptr,
                                  "copying the updated weights to the device");
}

// One parameter's weights (its slice of the twin, or its own buffer).
void DeviceFront::copy_one(const Param& p) {
    wait_uploads();
    if (p.numel == 0) return;
    DS_CHECK(p.working.is_contiguous(), DS_ERR_INTERNAL, "parameter '%s': host working weights not contiguous",
             p.name.c_str());
    const device_memory::DeviceScope scope(device_.index);
    device_memory::copy_on_stream(weights(p).data_ptr(), p.working.data_ptr(), p.working.nbytes(), nullptr,
                                  "copying a parameter's weights to the device");
}

const Tensor& DeviceFront::weights(const Param& p) const {
    auto it = weights_.find(&p);
    if (it != weights_.end()) return it->second;
    auto g = gathered_.find(&p);
    if (g != gathered_.end()) {
        settle(&p);
        return g->second;
    }
    DS_CHECK(p.working.defined(), DS_ERR_INTERNAL, "parameter '%s' has no device weights (not gathered)",
             p.name.c_str());
    DS_CHECK(p.working.is_contiguous(), DS_ERR_INTERNAL, "parameter '%s': host working weights not contiguous",
             p.name.c_str());
    Tensor d = Tensor::empty(p.shape, p.working.dtype(), device_, alloc_, MemCategory::Params);
    if (p.numel > 0) {
        const device_memory::DeviceScope scope(device_.index);
        device_memory::copy_on_stream(d.data_ptr(), p.working.data_ptr(), p.working.nbytes(), nullptr,
                                      "copying a gathered parameter's weights to the device");
    }
    return gathered_.emplace(&p, std::move(d)).first->second;
}

void DeviceFront::stage_gathered(const std::vector<const Param*>& ps, bool ahead) {
    std::vector<const Param*> staged;
    std::vector<WeightPipe::Upload> batch;
    try {
        for (const Param* p : ps) {
            if (!p->working.defined() || weights_.count(p) || gathered_.count(p)) continue;
            DS_CHECK(p->working.is_contiguous() && p->working.device().is_cpu(), DS_ERR_INTERNAL,
                     "parameter '%s': gathered working weights not contiguous in host memory", p->name.c_str());
            Tensor d = Tensor::empty(p->shape, p->working.dtype(), device_, alloc_, MemCategory::Params);
            batch.push_back({d.data_ptr(), p->working.data_ptr(), p->working.nbytes()});
            gathered_.emplace(p, std::move(d));
            staged.push_back(p);
        }
        const char* what = "copying gathered weights to the device";
        if (!ahead) {
            gathered_up_.upload(batch, what);
            return;
        }
        void* ev = gathered_up_.upload_ahead(batch, what);
        if (ev == nullptr) return;
        try {
            ahead_.push_back({ev, staged});
        } catch (...) {
            gathered_up_.wait_batch(ev, what);
            throw;
        }
    } catch (...) {  // none of them counts as copied (what was queued lands before the blocks are reused)
        for (const Param* p : staged) gathered_.erase(p);
        throw;
    }
}

void DeviceFront::settle(const Param* p) const {
    for (auto it = ahead_.begin(); it != ahead_.end(); ++it) {
        if (std::find(it->params.begin(), it->params.end(), p) == it->params.end()) continue;
        void* ev = it->event;
        ahead_.erase(it);
        gathered_up_.wait_batch(ev, "ordering the kernels after a gathered layer's copies");
        return;
    }
}

void DeviceFront::settle_all() const {
    while (!ahead_.empty()) {
        void* ev = ahead_.back().event;
        ahead_.pop_back();
        gathered_up_.wait_batch(ev, "ordering the device's work after the gathered weights' copies");
    }
}

void DeviceFront::reserve_staging(size_t bytes) {
    if (staging_.defined() && staging_.nbytes() >= bytes) return;
    staging_ = Tensor();  // the old block goes first: peak memory is one staging buffer
    const Shape shape{static_cast<int64_t>(bytes)};
    staging_ = pin_ ? Tensor::empty_pinned(shape, DType::U8, alloc_, MemCategory::Buffers)
                    : Tensor::empty(shape, DType::U8, Device::cpu(), alloc_, MemCategory::Buffers);
}

const void* DeviceFront::to_host(const void* src, size_t bytes, const char* what) {
    if (bytes == 0) return nullptr;
    reserve_staging(bytes);
    const device_memory::DeviceScope scope(device_.index);
    device_memory::copy_on_stream(staging_.data_ptr(), src, bytes, nullptr, what);
    return staging_.data_ptr();
}

}  // namespace ds
