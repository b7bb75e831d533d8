// SPDX-License-Identifier: MIT
// vk: the loader (dlopen), the instance, and what each physical device offers.
#include "vk/vk_int.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gl_vk_built(void)
{
    return 1;
}

const char *gl_vk_result_name(VkResult r)
{
    switch (r) {
#define R(x)                                                                                       \
    case x:                                                                                        \
        return #x;
        R(VK_SUCCESS)
        R(VK_NOT_READY)
        R(VK_TIMEOUT)
        R(VK_INCOMPLETE)
        R(VK_ERROR_OUT_OF_HOST_MEMORY)
        R(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        R(VK_ERROR_INITIALIZATION_FAILED)
        R(VK_ERROR_DEVICE_LOST)
        R(VK_ERROR_MEMORY_MAP_FAILED)
        R(VK_ERROR_LAYER_NOT_PRESENT)
        R(VK_ERROR_EXTENSION_NOT_PRESENT)
        R(VK_ERROR_FEATURE_NOT_PRESENT)
        R(VK_ERROR_INCOMPATIBLE_DRIVER)
        R(VK_ERROR_TOO_MANY_OBJECTS)
        R(VK_ERROR_FRAGMENTED_POOL)
        R(VK_ERROR_OUT_OF_POOL_MEMORY)
        R(VK_ERROR_INVALID_SHADER_NV)
#undef R
    default:
        return "VkResult";
    }
}

// ---- loader ----

// libvulkan.so.1 (or $GLINT_VULKAN_LOADER) and its vkGetInstanceProcAddr. The library is never
// closed: drivers start threads and register handlers that outlive any one instance, and dlopen
// of an open library only takes another reference.
static PFN_vkGetInstanceProcAddr load_loader(struct gl_err *err)
{
    const char *env = getenv("GLINT_VULKAN_LOADER");
    const char *path = env && env[0] ? env : "libvulkan.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        gl_err_set(err, GL_E_UNSUPPORTED,
                   "vulkan: no Vulkan loader: cannot load %s (%s); install the loader and a "
                   "driver (Debian: libvulkan1 plus mesa-vulkan-drivers or the GPU vendor's "
                   "driver), or use --device cpu",
                   path, why ? why : "unknown error");
        return NULL;
    }
    PFN_vkGetInstanceProcAddr gipa;
    // POSIX: a function pointer is read through its object representation (ISO C has no cast).
    void *sym = dlsym(lib, "vkGetInstanceProcAddr");
    memcpy(&gipa, &sym, sizeof gipa);
    if (!gipa)
        gl_err_set(err, GL_E_UNSUPPORTED,
                   "vulkan: %s has no vkGetInstanceProcAddr: not a Vulkan loader; install "
                   "libvulkan1 or unset GLINT_VULKAN_LOADER",
                   path);
    return gipa;
}

// ---- validation (GLINT_VK_VALIDATION=1) ----

static atomic_long validation_errors;

long gl_vk_validation_errors(void)
{
    return atomic_load(&validation_errors);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    (void)user;
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        atomic_fetch_add(&validation_errors, 1);
        GL_LOGE("vulkan validation: %s", data->pMessage);
    } else {
        GL_LOGW("vulkan validation: %s", data->pMessage);
    }
    return VK_FALSE;
}

static int want_validation(void)
{
    const char *v = getenv("GLINT_VK_VALIDATION");
    return v && !strcmp(v, "1");
}

// ---- instance ----

gl_status gl_vk_instance_create(struct gl_vk_instance *vi, struct gl_err *err)
{
    memset(vi, 0, sizeof *vi);
    PFN_vkGetInstanceProcAddr gipa = load_loader(err);
    if (!gipa)
        return err ? err->code : GL_E_UNSUPPORTED;
    PFN_vkEnumerateInstanceVersion enum_version =
        (PFN_vkEnumerateInstanceVersion)gipa(NULL, "vkEnumerateInstanceVersion");
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
    uint32_t version = VK_API_VERSION_1_0;
    if (enum_version && enum_version(&version) != VK_SUCCESS)
        version = VK_API_VERSION_1_0;
    if (!create || version < VK_API_VERSION_1_1)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vulkan: the Vulkan loader is version %u.%u; glint needs 1.1 or later: "
                          "update libvulkan1, or use --device cpu",
                          VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "glint",
        .pEngineName = "glint",
        // The highest version glint uses; devices may be older (each is checked at open).
        .apiVersion = version < VK_API_VERSION_1_3 ? version : VK_API_VERSION_1_3,
    };
    const char *layer = "VK_LAYER_KHRONOS_validation";
    const char *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pApplicationInfo = &app,
    };
    int validate = want_validation();
    if (validate) {
        ci.enabledLayerCount = 1;
        ci.ppEnabledLayerNames = &layer;
        ci.enabledExtensionCount = 1;
        ci.ppEnabledExtensionNames = &ext;
    }
    VkResult r = create(&ci, NULL, &vi->instance);
    if (r == VK_ERROR_LAYER_NOT_PRESENT || r == VK_ERROR_EXTENSION_NOT_PRESENT)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vulkan: GLINT_VK_VALIDATION=1 but the Khronos validation layer is "
                          "not installed (Debian: vulkan-validationlayers)");
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vulkan: no Vulkan driver is installed (the loader found no ICD); "
                          "install one (Debian: mesa-vulkan-drivers, or the GPU vendor's), or "
                          "use --device cpu");
    if (r != VK_SUCCESS)
        return gl_err_set(err, GL_E_UNSUPPORTED, "vulkan: vkCreateInstance failed: %s",
                          gl_vk_result_name(r));
#define GL_VK_LOAD(name) vi->fn.name = (PFN_##name)gipa(vi->instance, #name);
    GL_VK_INSTANCE_FNS(GL_VK_LOAD)
#undef GL_VK_LOAD
    if (validate) {
        PFN_vkCreateDebugUtilsMessengerEXT mk = (PFN_vkCreateDebugUtilsMessengerEXT)gipa(
            vi->instance, "vkCreateDebugUtilsMessengerEXT");
        vi->destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)gipa(
            vi->instance, "vkDestroyDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerCreateInfoEXT mci = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT,
            .pfnUserCallback = on_validation,
        };
        if (mk && vi->destroy_messenger)
            mk(vi->instance, &mci, NULL, &vi->messenger);
    }
    return GL_OK;
}

void gl_vk_instance_destroy(struct gl_vk_instance *vi)
{
    if (!vi->instance)
        return;
    if (vi->messenger)
        vi->destroy_messenger(vi->instance, vi->messenger, NULL);
    vi->fn.vkDestroyInstance(vi->instance, NULL);
    vi->instance = VK_NULL_HANDLE;
}

gl_status gl_vk_physical_devices(struct gl_vk_instance *vi, VkPhysicalDevice **out, int *n,
                                 struct gl_err *err)
{
    uint32_t count = 0;
    *out = NULL;
    *n = 0;
    VkResult r = vi->fn.vkEnumeratePhysicalDevices(vi->instance, &count, NULL);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return gl_err_set(err, GL_E_UNSUPPORTED, "vulkan: vkEnumeratePhysicalDevices: %s",
                          gl_vk_result_name(r));
    if (count == 0)
        return GL_OK;
    VkPhysicalDevice *pd = gl_calloc(count, sizeof *pd);
    if (!pd)
        return gl_err_set(err, GL_E_NOMEM, "vulkan: out of memory listing devices");
    r = vi->fn.vkEnumeratePhysicalDevices(vi->instance, &count, pd);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        gl_free(pd);
        return gl_err_set(err, GL_E_UNSUPPORTED, "vulkan: vkEnumeratePhysicalDevices: %s",
                          gl_vk_result_name(r));
    }
    *out = pd;
    *n = (int)count;
    return GL_OK;
}

static const char *device_type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return "cpu";
    default:
        return "other";
    }
}

static int has_extension(struct gl_vk_instance *vi, VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (vi->fn.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return 0;
    VkExtensionProperties *e = gl_calloc(n, sizeof *e);
    int found = 0;
    if (e && vi->fn.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = !strcmp(e[i].extensionName, name);
    gl_free(e);
    return found;
}

// Properties and features by version: a structure newer than the device's version must not be
// chained (Vulkan valid usage), so 1.2 and 1.3 structures are added only where the device has them.
static void query_features(struct gl_vk_instance *vi, VkPhysicalDevice pd, uint32_t api,
                           struct gl_vk_device_info *info)
{
    VkPhysicalDeviceSubgroupProperties sub = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = &sub};
    VkPhysicalDeviceDriverProperties drv = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &m3};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = api >= VK_API_VERSION_1_2 ? (void *)&drv : &m3};
    vi->fn.vkGetPhysicalDeviceProperties2(pd, &p2);
    info->subgroup_size = sub.subgroupSize;
    info->subgroup_arith = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                           (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    info->max_alloc = m3.maxMemoryAllocationSize;
    if (api >= VK_API_VERSION_1_2)
        snprintf(info->driver, sizeof info->driver, "%.120s, %.120s", drv.driverName,
                 drv.driverInfo);

    VkPhysicalDevice16BitStorageFeatures s16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDevice8BitStorageFeatures s8 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES, .pNext = &s16};
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, .pNext = &s8};
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
        .pNext = &f16};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = api >= VK_API_VERSION_1_3   ? (void *)&dot
                                             : api >= VK_API_VERSION_1_2 ? (void *)&f16
                                                                         : (void *)&s16};
    vi->fn.vkGetPhysicalDeviceFeatures2(pd, &f2);
    info->storage16 = s16.storageBuffer16BitAccess;
    info->storage8 = s8.storageBuffer8BitAccess;
    info->float16 = f16.shaderFloat16;
    info->int8 = f16.shaderInt8;
    info->int_dot = dot.shaderIntegerDotProduct;
    info->coop_matrix = has_extension(vi, pd, "VK_KHR_cooperative_matrix");
    info->mem_budget = has_extension(vi, pd, "VK_EXT_memory_budget");
}

void gl_vk_query_budget(struct gl_vk_instance *vi, VkPhysicalDevice pd, int n,
                        struct gl_vk_heap *heaps)
{
    VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 m2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &b};
    vi->fn.vkGetPhysicalDeviceMemoryProperties2(pd, &m2);
    for (int h = 0; h < n && h < (int)VK_MAX_MEMORY_HEAPS; h++) {
        heaps[h].budget = b.heapBudget[h];
        heaps[h].used = b.heapUsage[h];
    }
}

void gl_vk_query_device(struct gl_vk_instance *vi, VkPhysicalDevice pd,
                        struct gl_vk_device_info *info, int *queue_family)
{
    memset(info, 0, sizeof *info);
    VkPhysicalDeviceProperties p;
    vi->fn.vkGetPhysicalDeviceProperties(pd, &p);
    snprintf(info->name, sizeof info->name, "%s", p.deviceName);
    snprintf(info->driver, sizeof info->driver, "driver version 0x%x", p.driverVersion);
    info->api_version = p.apiVersion;
    info->vendor_id = p.vendorID;
    info->device_id = p.deviceID;
    info->type = device_type_name(p.deviceType);
    info->max_storage_range = p.limits.maxStorageBufferRange;
    info->storage_align = (uint32_t)p.limits.minStorageBufferOffsetAlignment;
    info->max_push_bytes = p.limits.maxPushConstantsSize;
    info->max_shared_bytes = p.limits.maxComputeSharedMemorySize;
    if (p.apiVersion >= VK_API_VERSION_1_1)
        query_features(vi, pd, p.apiVersion, info);

    VkPhysicalDeviceMemoryProperties mem;
    vi->fn.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    info->n_heaps =
        (int)(mem.memoryHeapCount < GL_VK_MAX_HEAPS ? mem.memoryHeapCount : GL_VK_MAX_HEAPS);
    for (int h = 0; h < info->n_heaps; h++) {
        info->heaps[h].bytes = mem.memoryHeaps[h].size;
        info->heaps[h].device_local =
            (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
    }
    if (info->mem_budget)
        gl_vk_query_budget(vi, pd, info->n_heaps, info->heaps);

    // A compute queue: prefer a family without graphics (a dedicated compute engine).
    uint32_t nq = 0;
    vi->fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
    VkQueueFamilyProperties q[16];
    nq = nq < 16 ? nq : 16;
    vi->fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, q);
    *queue_family = -1;
    for (uint32_t i = 0; i < nq; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || q[i].queueCount == 0)
            continue;
        if (*queue_family < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            *queue_family = (int)i;
    }
    info->usable = p.apiVersion >= VK_API_VERSION_1_1 && *queue_family >= 0;
}

gl_status gl_vk_list_devices(struct gl_vk_device_info **out, int *n, struct gl_err *err)
{
    *out = NULL;
    *n = 0;
    struct gl_vk_instance vi;
    gl_status st = gl_vk_instance_create(&vi, err);
    if (st != GL_OK)
        return st;
    VkPhysicalDevice *pd = NULL;
    int np = 0;
    st = gl_vk_physical_devices(&vi, &pd, &np, err);
    if (st == GL_OK && np > 0) {
        *out = gl_calloc((size_t)np, sizeof **out);
        if (!*out)
            st = gl_err_set(err, GL_E_NOMEM, "vulkan: out of memory listing devices");
        for (int i = 0; st == GL_OK && i < np; i++) {
            int qf;
            gl_vk_query_device(&vi, pd[i], &(*out)[i], &qf);
        }
        if (st == GL_OK)
            *n = np;
    }
    gl_free(pd);
    gl_vk_instance_destroy(&vi);
    return st;
}
