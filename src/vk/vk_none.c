// SPDX-License-Identifier: MIT
// vk without Vulkan: the build found no Vulkan headers or no glslc (CMakeLists.txt), so every
// entry point says so. No device can be opened, hence none of the object functions is reached
// with a real object; they assert.
#include "vk/vk.h"

#include <stddef.h>

static gl_status not_built(struct gl_err *err)
{
    return gl_err_set(err, GL_E_UNSUPPORTED,
                      "vulkan: this glint was built without Vulkan (CMake found no Vulkan "
                      "headers or no glslc): install libvulkan-dev and glslc (Debian), rebuild, "
                      "or use --device cpu");
}

int gl_vk_built(void)
{
    return 0;
}

long gl_vk_validation_errors(void)
{
    return 0;
}

gl_status gl_vk_list_devices(struct gl_vk_device_info **out, int *n, struct gl_err *err)
{
    *out = NULL;
    *n = 0;
    return not_built(err);
}

gl_status gl_vk_device_open(int index, struct gl_vk_device **out, struct gl_err *err)
{
    (void)index;
    *out = NULL;
    return not_built(err);
}

void gl_vk_device_close(struct gl_vk_device *dev)
{
    GL_ASSERT(dev == NULL);
}

#define GL_VK_NO_OBJECT() GL_ASSERT_MSG(0, "vk: built without Vulkan: no object exists")

const struct gl_vk_device_info *gl_vk_device_info(const struct gl_vk_device *dev)
{
    (void)dev;
    GL_VK_NO_OBJECT();
}

int gl_vk_device_lost(const struct gl_vk_device *dev)
{
    (void)dev;
    GL_VK_NO_OBJECT();
}

void gl_vk_device_cap_storage_range(struct gl_vk_device *dev, uint64_t bytes)
{
    (void)dev;
    (void)bytes;
    GL_VK_NO_OBJECT();
}

gl_status gl_vk_buffer_create(struct gl_vk_device *dev, uint64_t bytes, enum gl_vk_mem mem,
                              const char *what, struct gl_vk_buffer **out, struct gl_err *err)
{
    (void)dev;
    (void)bytes;
    (void)mem;
    (void)what;
    *out = NULL;
    return not_built(err);
}

void gl_vk_buffer_free(struct gl_vk_buffer *buf)
{
    GL_ASSERT(buf == NULL);
}

uint64_t gl_vk_device_held(const struct gl_vk_device *dev, enum gl_vk_mem kind)
{
    (void)dev;
    (void)kind;
    GL_VK_NO_OBJECT();
}

uint64_t gl_vk_buffer_size(const struct gl_vk_buffer *buf)
{
    (void)buf;
    GL_VK_NO_OBJECT();
}

void *gl_vk_buffer_map(struct gl_vk_buffer *buf)
{
    (void)buf;
    GL_VK_NO_OBJECT();
}

gl_status gl_vk_upload(struct gl_vk_buffer *dst, uint64_t off, const void *src, uint64_t n,
                       struct gl_err *err)
{
    (void)dst;
    (void)off;
    (void)src;
    (void)n;
    return not_built(err);
}

gl_status gl_vk_download(struct gl_vk_buffer *src, uint64_t off, void *dst, uint64_t n,
                         struct gl_err *err)
{
    (void)src;
    (void)off;
    (void)dst;
    (void)n;
    return not_built(err);
}

gl_status gl_vk_pipeline_get(struct gl_vk_device *dev, const char *name, int n_buffers,
                             uint32_t push_bytes, const uint32_t *spec, int n_spec,
                             struct gl_vk_pipeline **out, struct gl_err *err)
{
    (void)dev;
    (void)name;
    (void)n_buffers;
    (void)push_bytes;
    (void)spec;
    (void)n_spec;
    *out = NULL;
    return not_built(err);
}

gl_status gl_vk_recorder_create(struct gl_vk_device *dev, struct gl_vk_recorder **out,
                                struct gl_err *err)
{
    (void)dev;
    *out = NULL;
    return not_built(err);
}

void gl_vk_recorder_free(struct gl_vk_recorder *rec)
{
    GL_ASSERT(rec == NULL);
}

gl_status gl_vk_rec_begin(struct gl_vk_recorder *rec, struct gl_err *err)
{
    (void)rec;
    return not_built(err);
}

gl_status gl_vk_rec_dispatch(struct gl_vk_recorder *rec, const struct gl_vk_pipeline *pipe,
                             const struct gl_vk_range *ranges, const void *push,
                             const uint32_t groups[3])
{
    (void)rec;
    (void)pipe;
    (void)ranges;
    (void)push;
    (void)groups;
    GL_VK_NO_OBJECT();
}

gl_status gl_vk_rec_copy(struct gl_vk_recorder *rec, struct gl_vk_buffer *src, uint64_t src_off,
                         struct gl_vk_buffer *dst, uint64_t dst_off, uint64_t n)
{
    (void)rec;
    (void)src;
    (void)src_off;
    (void)dst;
    (void)dst_off;
    (void)n;
    GL_VK_NO_OBJECT();
}

void gl_vk_rec_barrier(struct gl_vk_recorder *rec)
{
    (void)rec;
    GL_VK_NO_OBJECT();
}

gl_status gl_vk_rec_submit(struct gl_vk_recorder *rec, struct gl_err *err)
{
    (void)rec;
    return not_built(err);
}

int gl_vk_matmul_supported(enum gl_type type)
{
    (void)type;
    return 0;
}

gl_status gl_vk_rec_matmul(struct gl_vk_recorder *rec, const struct gl_vk_matmul *m,
                           struct gl_err *err)
{
    (void)rec;
    (void)m;
    return not_built(err);
}
