// SPDX-License-Identifier: MIT
// vk: turning a failed Vulkan call into a status and message. Device lifetime (vk_device.c) and
// command recording (vk_record.c) both report through here, so it sits below the two of them.
#include "vk/vk_int.h"

static const char lost_msg[] =
    "vulkan: the device was lost (%s during %s: a GPU reset, fault or driver crash); glint "
    "cannot use it any more: see the kernel log (dmesg) and restart glint, or use --device cpu";

gl_status gl_vk_fail(struct gl_vk_device *d, VkResult r, const char *call, struct gl_err *err)
{
    if (r == VK_ERROR_DEVICE_LOST) {
        d->lost = 1;
        return gl_err_set(err, GL_E_IO, lost_msg, gl_vk_result_name(r), call);
    }
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
        return gl_err_set(err, GL_E_NOMEM, "vulkan: %s: %s (device %s)", call, gl_vk_result_name(r),
                          d->info.name);
    return gl_err_set(err, GL_E_INTERNAL, "vulkan: %s failed: %s (device %s)", call,
                      gl_vk_result_name(r), d->info.name);
}

gl_status gl_vk_check_lost(const struct gl_vk_device *d, struct gl_err *err)
{
    if (!d->lost)
        return GL_OK;
    return gl_err_set(err, GL_E_IO, lost_msg, "VK_ERROR_DEVICE_LOST", "an earlier call");
}
