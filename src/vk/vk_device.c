// SPDX-License-Identifier: MIT
// vk: opening a device, memory, buffers, and the synchronous upload / download path.
#include "vk/vk_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))
// The staging buffer of gl_vk_upload / gl_vk_download: big enough that a copy costs more than
// its submit, small next to any device.
#define STAGING_BYTES GL_VK_STAGING_BYTES

static gl_status create_device(struct gl_vk_device *d, int index, struct gl_err *err)
{
    VkPhysicalDevice *pd = NULL;
    int np = 0;
    gl_status st = gl_vk_physical_devices(&d->vi, &pd, &np, err);
    if (st != GL_OK)
        return st;
    if (np == 0)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vulkan: no Vulkan device: the loader found no GPU or driver; install "
                          "a driver (Debian: mesa-vulkan-drivers has lavapipe, a CPU device for "
                          "tests), or use --device cpu");
    if (index < 0 || index >= np) {
        gl_free(pd);
        return gl_err_set(err, GL_E_INVAL,
                          "vulkan: device index %d out of range: there %s %d device%s (0..%d; "
                          "`glint devices` lists them)",
                          index, np == 1 ? "is" : "are", np, np == 1 ? "" : "s", np - 1);
    }
    d->pd = pd[index];
    gl_free(pd);
    int qf;
    gl_vk_query_device(&d->vi, d->pd, &d->info, &qf);
    if (!d->info.usable)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vulkan: device %d (%s) %s; glint needs Vulkan 1.1 and a compute "
                          "queue: update its driver, pick another device, or use --device cpu",
                          index, d->info.name,
                          qf < 0 ? "has no compute queue" : "supports only Vulkan 1.0");
    d->queue_family = (uint32_t)qf;
    const char *fault = getenv("GLINT_VK_FAULT_LOST_AT");
    d->fault_lost_at = fault ? strtol(fault, NULL, 10) : 0;
    d->storage_range = d->info.max_storage_range;
    d->vi.fn.vkGetPhysicalDeviceMemoryProperties(d->pd, &d->mem);

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = d->queue_family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci};
    VkResult r = d->vi.fn.vkCreateDevice(d->pd, &dci, NULL, &d->dev);
    if (r != VK_SUCCESS)
        return gl_vk_fail(d, r, "vkCreateDevice", err);
#define GL_VK_LOAD(fn_)                                                                            \
    d->vi.fn.fn_ = (PFN_##fn_)d->vi.fn.vkGetDeviceProcAddr(d->dev, #fn_);                          \
    if (!d->vi.fn.fn_)                                                                             \
        return gl_err_set(err, GL_E_UNSUPPORTED, "vulkan: the driver of %s lacks %s",              \
                          d->info.name, #fn_);
    GL_VK_DEVICE_FNS(GL_VK_LOAD)
#undef GL_VK_LOAD
    d->vi.fn.vkGetDeviceQueue(d->dev, d->queue_family, 0, &d->queue);
    return GL_OK;
}

gl_status gl_vk_device_open(int index, struct gl_vk_device **out, struct gl_err *err)
{
    *out = NULL;
    struct gl_vk_device *d = gl_calloc(1, sizeof *d);
    if (!d)
        return gl_err_set(err, GL_E_NOMEM, "vulkan: out of memory");
    gl_status st = gl_vk_instance_create(&d->vi, err);
    if (st == GL_OK)
        st = create_device(d, index, err);
    if (st != GL_OK) {
        gl_vk_device_close(d);
        return st;
    }
    *out = d;
    return GL_OK;
}

void gl_vk_device_close(struct gl_vk_device *d)
{
    if (!d)
        return;
    gl_vk_recorder_free(d->sync_rec);
    gl_vk_buffer_free(d->staging);
    GL_ASSERT_MSG(d->n_buffers == 0 && d->n_recorders == 0,
                  "vk: device closed with %d buffers and %d recorders alive", d->n_buffers,
                  d->n_recorders);
    // A driver that lacked an entry point (create_device) may have left some of them NULL;
    // pipelines exist only when every one was found.
    if (d->dev && d->vi.fn.vkDestroyDevice) {
        if (d->vi.fn.vkDeviceWaitIdle)
            d->vi.fn.vkDeviceWaitIdle(d->dev);
        for (int i = 0; i < d->n_pipes; i++) {
            struct gl_vk_pipeline *p = &d->pipes[i];
            d->vi.fn.vkDestroyPipeline(d->dev, p->pipeline, NULL);
            d->vi.fn.vkDestroyPipelineLayout(d->dev, p->layout, NULL);
            d->vi.fn.vkDestroyDescriptorSetLayout(d->dev, p->dsl, NULL);
        }
        d->vi.fn.vkDestroyDevice(d->dev, NULL);
    }
    gl_vk_instance_destroy(&d->vi);
    gl_free(d);
}

const struct gl_vk_device_info *gl_vk_device_info(const struct gl_vk_device *d)
{
    return &d->info;
}

int gl_vk_device_lost(const struct gl_vk_device *d)
{
    return d->lost;
}

void gl_vk_device_cap_storage_range(struct gl_vk_device *d, uint64_t bytes)
{
    GL_ASSERT(bytes > 0);
    if (bytes < d->storage_range)
        d->storage_range = bytes;
}

// ---- memory ----

// The memory type for `bits` (a buffer's allowed types): all `need` flags, and `want` if some
// type has them too. -1 when none qualifies.
static int pick_type(const VkPhysicalDeviceMemoryProperties *m, uint32_t bits,
                     VkMemoryPropertyFlags need, VkMemoryPropertyFlags want)
{
    int best = -1;
    for (uint32_t i = 0; i < m->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = m->memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (f & need) != need)
            continue;
        if ((f & want) == want)
            return (int)i;
        if (best < 0)
            best = (int)i;
    }
    return best;
}

static gl_status no_memory(struct gl_vk_device *d, uint32_t heap, uint64_t bytes, const char *what,
                           struct gl_err *err)
{
    char budget[160] = "";
    if (d->info.mem_budget && heap < (uint32_t)d->info.n_heaps) {
        struct gl_vk_heap *h = &d->info.heaps[heap];
        gl_vk_query_budget(&d->vi, d->pd, d->info.n_heaps, d->info.heaps);
        snprintf(budget, sizeof budget,
                 "; the driver gives this process a budget of %.1f MiB there and counts %.1f MiB "
                 "in use",
                 MIB(h->budget), MIB(h->used));
    }
    return gl_err_set(err, GL_E_NOMEM,
                      "vulkan: not enough device memory for %s on %s: %.1f MiB asked; memory "
                      "heap %u has %.1f MiB, of which glint already holds %.1f MiB%s; put fewer "
                      "layers or a smaller KV pool on the device, or use --device cpu",
                      what, d->info.name, MIB(bytes), heap, MIB(d->mem.memoryHeaps[heap].size),
                      MIB(d->heap_held[heap]),
                      budget[0] ? budget : " (other programs may hold more)");
}

static gl_status alloc_memory(struct gl_vk_buffer *b, enum gl_vk_mem kind, const char *what,
                              struct gl_err *err)
{
    struct gl_vk_device *d = b->d;
    VkMemoryRequirements req;
    d->vi.fn.vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
    int type =
        kind == GL_VK_MEM_HOST
            ? pick_type(&d->mem, req.memoryTypeBits,
                        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                        VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
            : pick_type(&d->mem, req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type < 0)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vulkan: %s has no %s memory type for storage buffers", d->info.name,
                          kind == GL_VK_MEM_HOST ? "host-visible coherent" : "usable");
    b->heap = d->mem.memoryTypes[type].heapIndex;
    uint64_t heap_bytes = d->mem.memoryHeaps[b->heap].size;
    if (req.size >
        heap_bytes - (d->heap_held[b->heap] < heap_bytes ? d->heap_held[b->heap] : heap_bytes))
        return no_memory(d, b->heap, req.size, what, err);
    if (d->info.max_alloc && req.size > d->info.max_alloc)
        return gl_err_set(err, GL_E_LIMIT,
                          "vulkan: %s needs one allocation of %.1f MiB; %s allows at most %.1f "
                          "MiB per allocation: split it into several buffers",
                          what, MIB(req.size), d->info.name, MIB(d->info.max_alloc));
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = (uint32_t)type};
    VkResult r = d->vi.fn.vkAllocateMemory(d->dev, &ai, NULL, &b->mem);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
        return no_memory(d, b->heap, req.size, what, err);
    if (r != VK_SUCCESS)
        return gl_vk_fail(d, r, "vkAllocateMemory", err);
    b->alloc_bytes = req.size; // may be more than the buffer's size
    d->heap_held[b->heap] += req.size;
    b->kind = (int)kind;
    d->kind_bytes[kind] += b->bytes;
    r = d->vi.fn.vkBindBufferMemory(d->dev, b->buf, b->mem, 0);
    if (r == VK_SUCCESS && kind == GL_VK_MEM_HOST)
        r = d->vi.fn.vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
    if (r != VK_SUCCESS)
        return gl_vk_fail(d, r, kind == GL_VK_MEM_HOST ? "vkMapMemory" : "vkBindBufferMemory", err);
    return GL_OK;
}

gl_status gl_vk_buffer_create(struct gl_vk_device *d, uint64_t bytes, enum gl_vk_mem kind,
                              const char *what, struct gl_vk_buffer **out, struct gl_err *err)
{
    *out = NULL;
    gl_status st = gl_vk_check_lost(d, err);
    if (st != GL_OK)
        return st;
    if (bytes == 0)
        return gl_err_set(err, GL_E_INVAL, "vulkan: %s: a buffer of 0 bytes", what);
    struct gl_vk_buffer *b = gl_calloc(1, sizeof *b);
    if (!b)
        return gl_err_set(err, GL_E_NOMEM, "vulkan: out of memory");
    b->d = d;
    b->kind = -1;
    // Shaders read storage as 32-bit words: a GGUF row may end 2 bytes into its last word.
    b->bytes = (bytes + 3) & ~(uint64_t)3;
    d->n_buffers++;
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = b->bytes,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = d->vi.fn.vkCreateBuffer(d->dev, &bci, NULL, &b->buf);
    st = r == VK_SUCCESS ? alloc_memory(b, kind, what, err)
                         : gl_vk_fail(d, r, "vkCreateBuffer", err);
    if (st != GL_OK) {
        gl_vk_buffer_free(b);
        return st;
    }
    *out = b;
    return GL_OK;
}

void gl_vk_buffer_free(struct gl_vk_buffer *b)
{
    if (!b)
        return;
    struct gl_vk_device *d = b->d;
    if (b->buf)
        d->vi.fn.vkDestroyBuffer(d->dev, b->buf, NULL);
    if (b->mem) { // freeing the memory unmaps it
        d->vi.fn.vkFreeMemory(d->dev, b->mem, NULL);
        d->heap_held[b->heap] -= b->alloc_bytes;
        d->kind_bytes[b->kind] -= b->bytes;
    }
    d->n_buffers--;
    gl_free(b);
}

uint64_t gl_vk_device_held(const struct gl_vk_device *d, enum gl_vk_mem kind)
{
    return d->kind_bytes[kind];
}

uint64_t gl_vk_buffer_size(const struct gl_vk_buffer *b)
{
    return b->bytes;
}

void *gl_vk_buffer_map(struct gl_vk_buffer *b)
{
    return b->map;
}

// ---- synchronous upload / download ----

static gl_status sync_setup(struct gl_vk_device *d, struct gl_err *err)
{
    gl_status st = GL_OK;
    if (!d->staging)
        st = gl_vk_buffer_create(d, STAGING_BYTES, GL_VK_MEM_HOST, "the staging buffer",
                                 &d->staging, err);
    if (st == GL_OK && !d->sync_rec)
        st = gl_vk_recorder_create(d, &d->sync_rec, err);
    return st;
}

static gl_status check_range(const struct gl_vk_buffer *b, uint64_t off, uint64_t n,
                             const char *who, struct gl_err *err)
{
    if (off > b->bytes || n > b->bytes - off)
        return gl_err_set(
            err, GL_E_INVAL, "vulkan: %s of %llu bytes at offset %llu is outside a buffer of %llu",
            who, (unsigned long long)n, (unsigned long long)off, (unsigned long long)b->bytes);
    return GL_OK;
}

// Copies n bytes from host memory `in` into buf (upload) or from buf into `out` (download, in
// NULL), in staging-sized pieces, one submit each.
static gl_status sync_copy(struct gl_vk_buffer *buf, uint64_t off, const uint8_t *in, uint8_t *out,
                           uint64_t n, struct gl_err *err)
{
    struct gl_vk_device *d = buf->d;
    gl_status st = check_range(buf, off, n, in ? "an upload" : "a download", err);
    if (st == GL_OK)
        st = gl_vk_check_lost(d, err);
    if (st == GL_OK)
        st = sync_setup(d, err);
    for (uint64_t done = 0; st == GL_OK && done < n; done += STAGING_BYTES) {
        uint64_t k = n - done < STAGING_BYTES ? n - done : STAGING_BYTES;
        if (in)
            memcpy(d->staging->map, in + done, k);
        st = gl_vk_rec_begin(d->sync_rec, err);
        if (st != GL_OK)
            break;
        if (in)
            gl_vk_rec_copy(d->sync_rec, d->staging, 0, buf, off + done, k);
        else
            gl_vk_rec_copy(d->sync_rec, buf, off + done, d->staging, 0, k);
        st = gl_vk_rec_submit(d->sync_rec, err);
        if (st == GL_OK && !in)
            memcpy(out + done, d->staging->map, k);
    }
    return st;
}

gl_status gl_vk_upload(struct gl_vk_buffer *dst, uint64_t off, const void *src, uint64_t n,
                       struct gl_err *err)
{
    return sync_copy(dst, off, src, NULL, n, err);
}

gl_status gl_vk_download(struct gl_vk_buffer *src, uint64_t off, void *dst, uint64_t n,
                         struct gl_err *err)
{
    return sync_copy(src, off, NULL, dst, n, err);
}
