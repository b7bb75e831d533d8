// SPDX-License-Identifier: MIT
// vk: compute pipelines from the embedded SPIR-V, and the recorder (one command buffer per
// submit, descriptor sets from pools reset at each begin).
#include "vk/vk_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

// Descriptor sets per pool; a recording that needs more takes another pool (kept for later
// steps), so an engine step of any size records without reallocating once warmed up.
#define SETS_PER_POOL 256

struct gl_vk_recorder {
    struct gl_vk_device *d;
    VkCommandPool cmd_pool;
    VkCommandBuffer cb;
    VkFence fence;
    VkDescriptorPool *pools;
    int n_pools, cur_pool;
    int recording;
    gl_status status; // first error since begin
    struct gl_err err;
};

// ---- pipelines ----

static const struct gl_vk_spirv *find_spirv(const char *name)
{
    for (int i = 0; i < gl_vk_spirv_count; i++)
        if (!strcmp(gl_vk_spirv[i].name, name))
            return &gl_vk_spirv[i];
    return NULL;
}

static gl_status build_pipeline(struct gl_vk_device *d, const struct gl_vk_spirv *spv,
                                struct gl_vk_pipeline *p, struct gl_err *err)
{
    const struct gl_vk_fns *f = &d->vi.fn;
    VkDescriptorSetLayoutBinding b[GL_VK_MAX_BINDINGS];
    for (int i = 0; i < p->n_buffers; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = (uint32_t)i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dci = {.sType =
                                               VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = (uint32_t)p->n_buffers,
                                           .pBindings = b};
    VkResult r = f->vkCreateDescriptorSetLayout(d->dev, &dci, NULL, &p->dsl);
    if (r != VK_SUCCESS)
        return gl_vk_fail(d, r, "vkCreateDescriptorSetLayout", err);
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = p->push_bytes};
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1,
                                      .pSetLayouts = &p->dsl,
                                      .pushConstantRangeCount = p->push_bytes ? 1 : 0,
                                      .pPushConstantRanges = &pcr};
    r = f->vkCreatePipelineLayout(d->dev, &lci, NULL, &p->layout);
    if (r != VK_SUCCESS)
        return gl_vk_fail(d, r, "vkCreatePipelineLayout", err);
    VkShaderModuleCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = spv->words * 4,
                                    .pCode = spv->code};
    VkShaderModule mod;
    r = f->vkCreateShaderModule(d->dev, &sci, NULL, &mod);
    if (r != VK_SUCCESS)
        return gl_vk_fail(d, r, "vkCreateShaderModule", err);
    VkSpecializationMapEntry map[GL_VK_MAX_SPEC];
    for (int i = 0; i < p->n_spec; i++)
        map[i] = (VkSpecializationMapEntry){
            .constantID = (uint32_t)i, .offset = (uint32_t)(4 * i), .size = 4};
    VkSpecializationInfo spec = {.mapEntryCount = (uint32_t)p->n_spec,
                                 .pMapEntries = map,
                                 .dataSize = 4 * (size_t)p->n_spec,
                                 .pData = p->spec};
    VkComputePipelineCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = mod,
                  .pName = "main",
                  .pSpecializationInfo = p->n_spec ? &spec : NULL},
        .layout = p->layout};
    r = f->vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &pci, NULL, &p->pipeline);
    f->vkDestroyShaderModule(d->dev, mod, NULL);
    if (r != VK_SUCCESS)
        return gl_vk_fail(d, r, "vkCreateComputePipelines", err);
    return GL_OK;
}

gl_status gl_vk_pipeline_get(struct gl_vk_device *d, const char *name, int n_buffers,
                             uint32_t push_bytes, const uint32_t *spec, int n_spec,
                             struct gl_vk_pipeline **out, struct gl_err *err)
{
    *out = NULL;
    GL_ASSERT(n_spec >= 0 && n_spec <= GL_VK_MAX_SPEC);
    for (int i = 0; i < d->n_pipes; i++) {
        struct gl_vk_pipeline *p = &d->pipes[i];
        if (!strcmp(p->name, name) && p->n_spec == n_spec &&
            (n_spec == 0 || !memcmp(p->spec, spec, 4 * (size_t)n_spec))) {
            GL_ASSERT_MSG(p->n_buffers == n_buffers && p->push_bytes == push_bytes,
                          "vk: pipeline %s asked with another layout", name);
            *out = p;
            return GL_OK;
        }
    }
    gl_status st = gl_vk_check_lost(d, err);
    if (st != GL_OK)
        return st;
    const struct gl_vk_spirv *spv = find_spirv(name);
    GL_ASSERT_MSG(spv != NULL, "vk: no embedded shader %s", name);
    GL_ASSERT(n_buffers >= 0 && n_buffers <= GL_VK_MAX_BINDINGS);
    GL_ASSERT(d->n_pipes < GL_VK_MAX_PIPELINES);
    if (push_bytes > d->info.max_push_bytes)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vulkan: shader %s needs %u bytes of push constants; %s has %u", name,
                          push_bytes, d->info.name, d->info.max_push_bytes);
    struct gl_vk_pipeline *p = &d->pipes[d->n_pipes];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->n_buffers = n_buffers;
    p->push_bytes = push_bytes;
    p->n_spec = n_spec;
    if (n_spec)
        memcpy(p->spec, spec, 4 * (size_t)n_spec);
    st = build_pipeline(d, spv, p, err);
    if (st != GL_OK) {
        const struct gl_vk_fns *f = &d->vi.fn;
        f->vkDestroyPipeline(d->dev, p->pipeline, NULL); // null handles are ignored
        f->vkDestroyPipelineLayout(d->dev, p->layout, NULL);
        f->vkDestroyDescriptorSetLayout(d->dev, p->dsl, NULL);
        return st;
    }
    d->n_pipes++;
    *out = p;
    return GL_OK;
}

// ---- recorder ----

static gl_status rec_fail(struct gl_vk_recorder *rec, gl_status code, const char *fmt, ...)
    GL_PRINTF(3, 4);
static gl_status rec_fail(struct gl_vk_recorder *rec, gl_status code, const char *fmt, ...)
{
    if (rec->status == GL_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rec->err.msg, sizeof rec->err.msg, fmt, ap);
        va_end(ap);
        rec->status = rec->err.code = code;
    }
    return rec->status;
}

static gl_status rec_vk_fail(struct gl_vk_recorder *rec, VkResult r, const char *call)
{
    if (rec->status == GL_OK)
        rec->status = gl_vk_fail(rec->d, r, call, &rec->err);
    return rec->status;
}

gl_status gl_vk_recorder_create(struct gl_vk_device *d, struct gl_vk_recorder **out,
                                struct gl_err *err)
{
    *out = NULL;
    gl_status st = gl_vk_check_lost(d, err);
    if (st != GL_OK)
        return st;
    struct gl_vk_recorder *rec = gl_calloc(1, sizeof *rec);
    if (!rec)
        return gl_err_set(err, GL_E_NOMEM, "vulkan: out of memory");
    rec->d = d;
    d->n_recorders++;
    const struct gl_vk_fns *f = &d->vi.fn;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                                   .queueFamilyIndex = d->queue_family};
    VkResult r = f->vkCreateCommandPool(d->dev, &pci, NULL, &rec->cmd_pool);
    const char *call = "vkCreateCommandPool";
    if (r == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = rec->cmd_pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        r = f->vkAllocateCommandBuffers(d->dev, &ai, &rec->cb);
        call = "vkAllocateCommandBuffers";
    }
    if (r == VK_SUCCESS) {
        VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = f->vkCreateFence(d->dev, &fci, NULL, &rec->fence);
        call = "vkCreateFence";
    }
    if (r != VK_SUCCESS) {
        st = gl_vk_fail(d, r, call, err);
        gl_vk_recorder_free(rec);
        return st;
    }
    *out = rec;
    return GL_OK;
}

void gl_vk_recorder_free(struct gl_vk_recorder *rec)
{
    if (!rec)
        return;
    GL_ASSERT_MSG(!rec->recording, "vk: recorder freed while recording");
    struct gl_vk_device *d = rec->d;
    const struct gl_vk_fns *f = &d->vi.fn;
    for (int i = 0; i < rec->n_pools; i++)
        f->vkDestroyDescriptorPool(d->dev, rec->pools[i], NULL);
    gl_free(rec->pools);
    if (rec->fence)
        f->vkDestroyFence(d->dev, rec->fence, NULL);
    if (rec->cmd_pool) // frees its command buffer
        f->vkDestroyCommandPool(d->dev, rec->cmd_pool, NULL);
    d->n_recorders--;
    gl_free(rec);
}

gl_status gl_vk_rec_begin(struct gl_vk_recorder *rec, struct gl_err *err)
{
    GL_ASSERT_MSG(!rec->recording, "vk: begin while recording");
    struct gl_vk_device *d = rec->d;
    const struct gl_vk_fns *f = &d->vi.fn;
    rec->status = GL_OK;
    rec->err.code = GL_OK;
    rec->err.msg[0] = 0;
    gl_status st = gl_vk_check_lost(d, err);
    if (st != GL_OK)
        return st;
    for (int i = 0; i < rec->n_pools; i++)
        f->vkResetDescriptorPool(d->dev, rec->pools[i], 0);
    rec->cur_pool = 0;
    VkResult r = f->vkResetCommandPool(d->dev, rec->cmd_pool, 0);
    if (r != VK_SUCCESS)
        return gl_vk_fail(d, r, "vkResetCommandPool", err);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    r = f->vkBeginCommandBuffer(rec->cb, &bi);
    if (r != VK_SUCCESS)
        return gl_vk_fail(d, r, "vkBeginCommandBuffer", err);
    rec->recording = 1;
    return GL_OK;
}

static gl_status add_pool(struct gl_vk_recorder *rec)
{
    struct gl_vk_device *d = rec->d;
    VkDescriptorPool *pools = gl_realloc(rec->pools, (size_t)(rec->n_pools + 1) * sizeof *pools);
    if (!pools)
        return rec_fail(rec, GL_E_NOMEM, "vulkan: out of memory for descriptor pools");
    rec->pools = pools;
    VkDescriptorPoolSize size = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                 .descriptorCount = SETS_PER_POOL * GL_VK_MAX_BINDINGS};
    VkDescriptorPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = SETS_PER_POOL,
                                     .poolSizeCount = 1,
                                     .pPoolSizes = &size};
    VkResult r = d->vi.fn.vkCreateDescriptorPool(d->dev, &ci, NULL, &rec->pools[rec->n_pools]);
    if (r != VK_SUCCESS)
        return rec_vk_fail(rec, r, "vkCreateDescriptorPool");
    rec->n_pools++;
    return GL_OK;
}

// A descriptor set of layout dsl from the current pool, moving to the next (made if needed)
// when the current one is full.
static gl_status alloc_set(struct gl_vk_recorder *rec, VkDescriptorSetLayout dsl,
                           VkDescriptorSet *set)
{
    struct gl_vk_device *d = rec->d;
    for (;;) {
        if (rec->cur_pool == rec->n_pools && add_pool(rec) != GL_OK)
            return rec->status;
        VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                          .descriptorPool = rec->pools[rec->cur_pool],
                                          .descriptorSetCount = 1,
                                          .pSetLayouts = &dsl};
        VkResult r = d->vi.fn.vkAllocateDescriptorSets(d->dev, &ai, set);
        if (r == VK_SUCCESS)
            return GL_OK;
        if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
            return rec_vk_fail(rec, r, "vkAllocateDescriptorSets");
        rec->cur_pool++;
    }
}

gl_status gl_vk_rec_dispatch(struct gl_vk_recorder *rec, const struct gl_vk_pipeline *pipe,
                             const struct gl_vk_range *ranges, const void *push,
                             const uint32_t groups[3])
{
    GL_ASSERT_MSG(rec->recording, "vk: dispatch outside begin/submit");
    if (rec->status != GL_OK)
        return rec->status;
    struct gl_vk_device *d = rec->d;
    const struct gl_vk_fns *f = &d->vi.fn;
    VkDescriptorBufferInfo bi[GL_VK_MAX_BINDINGS];
    VkWriteDescriptorSet wr[GL_VK_MAX_BINDINGS];
    VkDescriptorSet set;
    if (alloc_set(rec, pipe->dsl, &set) != GL_OK)
        return rec->status;
    for (int i = 0; i < pipe->n_buffers; i++) {
        const struct gl_vk_range *rg = &ranges[i];
        GL_ASSERT_MSG(rg->buf->d == d, "vk: %s binding %d: a buffer of another device", pipe->name,
                      i);
        GL_ASSERT_MSG(rg->off % d->info.storage_align == 0 && rg->off < rg->buf->bytes,
                      "vk: %s binding %d at offset %llu (alignment %u, buffer %llu bytes)",
                      pipe->name, i, (unsigned long long)rg->off, d->info.storage_align,
                      (unsigned long long)rg->buf->bytes);
        uint64_t bytes = rg->bytes ? rg->bytes : rg->buf->bytes - rg->off;
        GL_ASSERT(bytes <= rg->buf->bytes - rg->off);
        if (bytes > d->storage_range)
            return rec_fail(rec, GL_E_LIMIT,
                            "vulkan: %s binding %d spans %llu bytes; %s binds at most %llu",
                            pipe->name, i, (unsigned long long)bytes, d->info.name,
                            (unsigned long long)d->storage_range);
        bi[i] = (VkDescriptorBufferInfo){.buffer = rg->buf->buf, .offset = rg->off, .range = bytes};
        wr[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                       .dstSet = set,
                                       .dstBinding = (uint32_t)i,
                                       .descriptorCount = 1,
                                       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .pBufferInfo = &bi[i]};
    }
    f->vkUpdateDescriptorSets(d->dev, (uint32_t)pipe->n_buffers, wr, 0, NULL);
    f->vkCmdBindPipeline(rec->cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe->pipeline);
    f->vkCmdBindDescriptorSets(rec->cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe->layout, 0, 1, &set, 0,
                               NULL);
    if (pipe->push_bytes)
        f->vkCmdPushConstants(rec->cb, pipe->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                              pipe->push_bytes, push);
    f->vkCmdDispatch(rec->cb, groups[0], groups[1], groups[2]);
    return GL_OK;
}

gl_status gl_vk_rec_copy(struct gl_vk_recorder *rec, struct gl_vk_buffer *src, uint64_t src_off,
                         struct gl_vk_buffer *dst, uint64_t dst_off, uint64_t n)
{
    GL_ASSERT_MSG(rec->recording, "vk: copy outside begin/submit");
    GL_ASSERT(src_off <= src->bytes && n <= src->bytes - src_off);
    GL_ASSERT(dst_off <= dst->bytes && n <= dst->bytes - dst_off);
    if (rec->status != GL_OK || n == 0)
        return rec->status;
    VkBufferCopy c = {.srcOffset = src_off, .dstOffset = dst_off, .size = n};
    rec->d->vi.fn.vkCmdCopyBuffer(rec->cb, src->buf, dst->buf, 1, &c);
    return GL_OK;
}

static void memory_barrier(struct gl_vk_recorder *rec, VkPipelineStageFlags dst_stage,
                           VkAccessFlags dst_access)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask =
                              VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = dst_access};
    rec->d->vi.fn.vkCmdPipelineBarrier(
        rec->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stage,
        0, 1, &mb, 0, NULL, 0, NULL);
}

void gl_vk_rec_barrier(struct gl_vk_recorder *rec)
{
    GL_ASSERT_MSG(rec->recording, "vk: barrier outside begin/submit");
    if (rec->status != GL_OK)
        return;
    memory_barrier(rec, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
}

gl_status gl_vk_rec_error(const struct gl_vk_recorder *rec, struct gl_err *err)
{
    if (rec->status != GL_OK && err)
        *err = rec->err;
    return rec->status;
}

gl_status gl_vk_rec_submit(struct gl_vk_recorder *rec, struct gl_err *err)
{
    GL_ASSERT_MSG(rec->recording, "vk: submit without begin");
    struct gl_vk_device *d = rec->d;
    const struct gl_vk_fns *f = &d->vi.fn;
    rec->recording = 0;
    // The device's writes reach the host domain before the fence signals (mapped read-back).
    if (rec->status == GL_OK)
        memory_barrier(rec, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VkResult r = f->vkEndCommandBuffer(rec->cb);
    if (r != VK_SUCCESS)
        rec_vk_fail(rec, r, "vkEndCommandBuffer");
    if (rec->status == GL_OK) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &rec->cb};
        r = f->vkResetFences(d->dev, 1, &rec->fence);
        if (r == VK_SUCCESS)
            r = f->vkQueueSubmit(d->queue, 1, &si, rec->fence);
        if (r == VK_SUCCESS && ++d->submits == d->fault_lost_at) {
            f->vkWaitForFences(d->dev, 1, &rec->fence, VK_TRUE, UINT64_MAX);
            r = VK_ERROR_DEVICE_LOST; // injected (vk.h): the work ran, its results are not used
        }
        if (r != VK_SUCCESS)
            rec_vk_fail(rec, r, "vkQueueSubmit");
        else if ((r = f->vkWaitForFences(d->dev, 1, &rec->fence, VK_TRUE, UINT64_MAX)) !=
                 VK_SUCCESS)
            rec_vk_fail(rec, r, "vkWaitForFences");
    }
    return gl_vk_rec_error(rec, err);
}
