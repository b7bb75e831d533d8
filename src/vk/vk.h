// SPDX-License-Identifier: MIT
// vk: the Vulkan device layer (issue 20). Opens a device (instance, physical device, one compute
// queue), lists the devices, owns device buffers, builds compute pipelines from the SPIR-V that the
// build compiled from src/vk/shaders/*.comp and embedded, and records work into one command buffer
// that is submitted once and waited for: the forward pass records a whole engine step (many
// dispatches, barriers between dependent ones) and submits it once. The matmul over GGUF-layout
// weights (every type glint computes with) is recorded with gl_vk_rec_matmul.
//
// Loading: libvulkan.so.1 is opened with dlopen (GLINT_VULKAN_LOADER names another file) and
// every entry point is fetched through vkGetInstanceProcAddr / vkGetDeviceProcAddr, so a binary
// built with Vulkan starts and runs on the CPU where there is no loader. A build without the
// Vulkan headers or glslc has the same API; every call then fails with GL_E_UNSUPPORTED saying
// so (gl_vk_built() tells which).
//
// Ownership: a device owns its pipelines, its staging buffer and its internal recorder; buffers
// and recorders are created on a device and must be freed before it is closed. Nothing here
// keeps a pointer to caller memory after a call returns.
//
// Threading: a device, and everything created on it, is used by one thread at a time (the
// caller serialises: the engine thread). Different devices are independent. gl_vk_list_devices
// may run on any thread.
//
// Errors: gl_status plus a gl_err message that says what to do:
//   GL_E_UNSUPPORTED  built without Vulkan; no loader (install libvulkan1 and a driver); no
//                     device; a device below Vulkan 1.1 or without a compute queue
//   GL_E_INVAL        device index out of range (names `glint devices`); bad offsets / sizes
//   GL_E_NOMEM        not enough device (or host-visible) memory, with the MiB asked, the
//                     heap's size and what glint already holds on it
//   GL_E_LIMIT        one allocation or one binding over a device limit, with both numbers
//   GL_E_IO           the device was lost (GPU reset or fault); the device is then unusable:
//                     every later call on it fails the same way (gl_vk_device_lost).
//                     GLINT_VK_FAULT_LOST_AT=N makes the N-th submission of each device opened
//                     with it report a lost device (tests of the callers' error paths)
//   GL_E_INTERNAL     any other Vulkan failure, naming the call and its VkResult
#pragma once

#include "base/base.h"
#include "quant/quant.h"

#include <stdint.h>

// 1 when this binary was built with Vulkan (headers and glslc found by CMake), else 0.
int gl_vk_built(void);

// GLINT_VK_VALIDATION=1 turns on the Khronos validation layer (Debian: vulkan-validationlayers)
// for every instance; this counts the errors it reported so far in the process (tests require 0).
long gl_vk_validation_errors(void);

// ---- devices ----

#define GL_VK_MAX_HEAPS 16
struct gl_vk_heap {
    uint64_t bytes;
    int device_local; // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT
    // VK_EXT_memory_budget, when the device has it (mem_budget), at the time of the query: what
    // this process may allocate on the heap in all, and what it holds.
    uint64_t budget, used;
};

// What `glint devices` prints: identity, memory, and the features glint uses or will use.
struct gl_vk_device_info {
    char name[256];
    char driver[256];     // driver name and info ("llvmpipe, Mesa 22.3.6 (LLVM 15.0.6)")
    uint32_t api_version; // the device's Vulkan version (VK_MAKE_API_VERSION packing)
    uint32_t vendor_id, device_id;
    const char *type; // "discrete", "integrated", "virtual", "cpu" or "other"
    int n_heaps;
    struct gl_vk_heap heaps[GL_VK_MAX_HEAPS];
    // Features (1 = yes): 16-bit and 8-bit storage buffers, shaderFloat16, shaderInt8, integer
    // dot product, VK_KHR_cooperative_matrix; the subgroup size and whether subgroup arithmetic
    // works in compute shaders.
    int storage16, storage8, float16, int8, int_dot, coop_matrix, subgroup_arith;
    int mem_budget; // VK_EXT_memory_budget: heaps[].budget and .used are filled
    uint32_t subgroup_size;
    // Limits the layer respects.
    uint64_t max_storage_range; // bytes one storage-buffer binding may span
    uint64_t max_alloc;         // bytes of one memory allocation
    uint32_t storage_align;     // minStorageBufferOffsetAlignment
    uint32_t max_push_bytes, max_shared_bytes;
    int usable; // 1 when glint can open it: Vulkan 1.1 or later and a compute queue
};

// Lists the devices: *out (n entries, gl_free it) in the loader's order, the index
// gl_vk_device_open takes. n = 0 is not an error here (the caller says "no device").
gl_status gl_vk_list_devices(struct gl_vk_device_info **out, int *n, struct gl_err *err);

struct gl_vk_device;
// Opens device `index` of gl_vk_list_devices.
gl_status gl_vk_device_open(int index, struct gl_vk_device **out, struct gl_err *err);
// Waits for the device to be idle, frees its pipelines and internal buffers; NULL is a no-op.
// Every buffer and recorder created on it must be freed first (asserted).
void gl_vk_device_close(struct gl_vk_device *dev);
const struct gl_vk_device_info *gl_vk_device_info(const struct gl_vk_device *dev);
// 1 once a call saw VK_ERROR_DEVICE_LOST.
int gl_vk_device_lost(const struct gl_vk_device *dev);
// Lowers the binding range the layer assumes (bytes, > 0): the tests use it to exercise the
// splitting of large matrices on small ones.
void gl_vk_device_cap_storage_range(struct gl_vk_device *dev, uint64_t bytes);

// ---- buffers ----

enum gl_vk_mem {
    GL_VK_MEM_DEVICE, // device-local where the device has such memory: weights, KV, activations
    GL_VK_MEM_HOST,   // host-visible and coherent, mapped for its lifetime: staging, read-back
};
struct gl_vk_buffer;
// A storage buffer of `bytes` (> 0, rounded up to a multiple of 4: shaders read 32-bit words) in
// its own allocation. `what` names it in memory errors
// ("weights", "KV pool").
gl_status gl_vk_buffer_create(struct gl_vk_device *dev, uint64_t bytes, enum gl_vk_mem mem,
                              const char *what, struct gl_vk_buffer **out, struct gl_err *err);
void gl_vk_buffer_free(struct gl_vk_buffer *buf); // NULL is a no-op
// Bytes of the live buffers of one kind on dev, as asked for (rounded up to 4; the driver's
// allocations may be larger by its alignment): what `glint plan --device vulkan` predicts.
uint64_t gl_vk_device_held(const struct gl_vk_device *dev, enum gl_vk_mem kind);
// The host-visible staging buffer gl_vk_upload / gl_vk_download make on first use and keep.
#define GL_VK_STAGING_BYTES ((uint64_t)16 << 20)
uint64_t gl_vk_buffer_size(const struct gl_vk_buffer *buf);
// The mapping of a GL_VK_MEM_HOST buffer (valid until it is freed); NULL for device memory.
// Host writes are seen by work submitted after them; device writes are seen by the host after
// the submit that made them returns.
void *gl_vk_buffer_map(struct gl_vk_buffer *buf);
// Synchronous copies between host memory and any buffer through the device's staging buffer
// (each waits for the device; for loading weights and for tests, not for per-step traffic, which
// goes through a GL_VK_MEM_HOST buffer and gl_vk_rec_copy). off + n must fit the buffer.
gl_status gl_vk_upload(struct gl_vk_buffer *dst, uint64_t off, const void *src, uint64_t n,
                       struct gl_err *err);
gl_status gl_vk_download(struct gl_vk_buffer *src, uint64_t off, void *dst, uint64_t n,
                         struct gl_err *err);

// ---- pipelines ----

struct gl_vk_pipeline;
// The compute pipeline of embedded shader `name` (file name without .comp), with n_buffers
// storage buffers at set 0, bindings 0..n_buffers-1, push_bytes of push constants, and the
// 32-bit specialization constants spec[0..n_spec) (constant_id 0, 1, ...; n_spec <=
// GL_VK_MAX_SPEC). Created on first use and cached by the device per (name, spec) (owned by it).
#define GL_VK_MAX_SPEC 4
gl_status gl_vk_pipeline_get(struct gl_vk_device *dev, const char *name, int n_buffers,
                             uint32_t push_bytes, const uint32_t *spec, int n_spec,
                             struct gl_vk_pipeline **out, struct gl_err *err);

// ---- recording ----

// A recorder: one command buffer recorded between begin and submit, submitted once, waited for
// with a fence; then it can begin again (an engine step each time). Recording calls after an
// error do nothing and the first error comes back from gl_vk_rec_submit.
struct gl_vk_recorder;
gl_status gl_vk_recorder_create(struct gl_vk_device *dev, struct gl_vk_recorder **out,
                                struct gl_err *err);
void gl_vk_recorder_free(struct gl_vk_recorder *rec); // NULL is a no-op; not while recording
gl_status gl_vk_rec_begin(struct gl_vk_recorder *rec, struct gl_err *err);

// A byte range of a buffer bound to one shader binding; off must be a multiple of the device's
// storage_align (gl_vk_device_info), bytes 0 means to the end of the buffer.
struct gl_vk_range {
    struct gl_vk_buffer *buf;
    uint64_t off, bytes;
};
#define GL_VK_MAX_BINDINGS 8
// Records one dispatch of groups[0] x groups[1] x groups[2] workgroups of `pipe`, with its buffers
// bound to ranges[0..n_buffers) and push_bytes of push constants from `push`.
gl_status gl_vk_rec_dispatch(struct gl_vk_recorder *rec, const struct gl_vk_pipeline *pipe,
                             const struct gl_vk_range *ranges, const void *push,
                             const uint32_t groups[3]);
// Records a copy of n bytes between buffers (device <-> host buffers: step inputs and outputs).
gl_status gl_vk_rec_copy(struct gl_vk_recorder *rec, struct gl_vk_buffer *src, uint64_t src_off,
                         struct gl_vk_buffer *dst, uint64_t dst_off, uint64_t n);
// Every shader or copy write recorded before is visible to every shader or copy access recorded
// after. Record one between a dispatch and the next one that reads what it wrote.
void gl_vk_rec_barrier(struct gl_vk_recorder *rec);
// Ends the command buffer, submits it, waits for it to finish (writes then visible to the host),
// and returns the first error of the recording, the submit or the wait.
gl_status gl_vk_rec_submit(struct gl_vk_recorder *rec, struct gl_err *err);

// ---- matmul ----

// y[t * y_stride + r] = sum over c < cols of W[r][c] * x[t * x_stride + c], for r < rows and
// t < n_tok; W in its GGUF block layout (row r at w_off + r * gl_type_row_size(type, cols)),
// x and y fp32. Offsets in bytes, multiples of 4; strides in floats, >= cols and >= rows.
// Weights are dequantized in the shader exactly as gl_dequantize_row_ref does; products are
// summed in fp32 (src/vk/shaders/matmul.glsl: the order, and why a token's result does not
// depend on the other tokens of the call). Rows whose weights span more than the device's
// storage range are split into several dispatches.
struct gl_vk_matmul {
    enum gl_type type;
    int64_t rows, cols, n_tok;
    struct gl_vk_buffer *w;
    uint64_t w_off;
    struct gl_vk_buffer *x;
    uint64_t x_off;
    int64_t x_stride;
    struct gl_vk_buffer *y;
    uint64_t y_off;
    int64_t y_stride;
};
// 1 for the weight types with a matmul shader: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K.
int gl_vk_matmul_supported(enum gl_type type);
// Records the matmul (no barrier before or after: the caller places them). GL_E_INVAL names a
// bad shape or offset, GL_E_UNSUPPORTED a type without a shader, GL_E_LIMIT activations or
// outputs wider than one binding: such a call records nothing and the recorder stays usable.
// A failure inside the recording (descriptor pools) is the recorder's, as for a dispatch.
gl_status gl_vk_rec_matmul(struct gl_vk_recorder *rec, const struct gl_vk_matmul *m,
                           struct gl_err *err);
