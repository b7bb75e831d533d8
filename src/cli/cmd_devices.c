// SPDX-License-Identifier: MIT
// glint devices: the Vulkan devices this machine offers (the index is what --device vulkan:N will
// take), with their driver, memory heaps, the features glint's shaders use, and the limits the
// device layer respects (src/vk/vk.h). Exits 1 with the layer's message when this glint was
// built without Vulkan, or there is no loader or no device.
#include "cli.h"

#include "vk/vk.h"

#include <stdio.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

static const char *yn(int v)
{
    return v ? "yes" : "no";
}

static void print_device(int i, const struct gl_vk_device_info *d)
{
    printf("%d: %s (%s)%s\n", i, d->name, d->type, d->usable ? "" : "  [not usable by glint]");
    printf("   driver:   %s; Vulkan %u.%u.%u; vendor 0x%04x device 0x%04x\n", d->driver,
           (d->api_version >> 22) & 0x7f, (d->api_version >> 12) & 0x3ff, d->api_version & 0xfff,
           d->vendor_id, d->device_id);
    for (int h = 0; h < d->n_heaps; h++) {
        const struct gl_vk_heap *m = &d->heaps[h];
        printf("   memory:   heap %d %.2f GiB%s", h, (double)m->bytes / GIB,
               m->device_local ? " device-local" : "");
        if (d->mem_budget)
            printf(", budget %.2f GiB, in use %.2f GiB", (double)m->budget / GIB,
                   (double)m->used / GIB);
        printf("\n");
    }
    printf("   features: 16-bit storage %s, 8-bit storage %s, shaderFloat16 %s, shaderInt8 %s, "
           "integer dot product %s, cooperative matrix %s, subgroup size %u (arithmetic %s)\n",
           yn(d->storage16), yn(d->storage8), yn(d->float16), yn(d->int8), yn(d->int_dot),
           yn(d->coop_matrix), d->subgroup_size, yn(d->subgroup_arith));
    printf("   limits:   storage binding %.0f MiB, allocation %.0f MiB, shared memory %u KiB, "
           "push constants %u B, storage offset alignment %u B\n",
           (double)d->max_storage_range / 1048576.0, (double)d->max_alloc / 1048576.0,
           d->max_shared_bytes / 1024, d->max_push_bytes, d->storage_align);
}

int gl_cmd_devices(int argc, char **argv)
{
    struct gl_cli_spec s = {.cmd = "glint devices",
                            .synopsis = "",
                            .about = "Lists the Vulkan devices (index, name, driver, memory, "
                                     "features, limits). GLINT_VULKAN_LOADER names another loader "
                                     "than libvulkan.so.1."};
    GL_CLI_PARSE(&s, argc, argv);
    struct gl_vk_device_info *devs = NULL;
    int n = 0;
    struct gl_err err = {0};
    if (gl_vk_list_devices(&devs, &n, &err) != GL_OK) {
        fprintf(stderr, "glint devices: %s\n", err.msg);
        return 1;
    }
    if (n == 0) {
        fprintf(stderr, "glint devices: no Vulkan device: the loader found no GPU or driver; "
                        "install a driver (Debian: mesa-vulkan-drivers has lavapipe, a CPU "
                        "device), or use --device cpu\n");
        return 1;
    }
    for (int i = 0; i < n; i++)
        print_device(i, &devs[i]);
    gl_free(devs);
    return 0;
}
